// DNS over TCP carries each message behind a two-byte length (RFC 1035 §4.2.2, RFC 7766 §8); this splits a
// connection's byte stream back into messages, however the chunks were cut.

/** The next message; `incomplete` until its bytes arrive; a length of 0, or one too short for a header, ends the stream. */
export type Frame = Buffer | 'incomplete' | 'zero-length' | 'too-short';

/**
 * Chunks are kept as they came and joined once per message, so a message dribbled in one byte at a time costs
 * linear work, not a copy of everything so far on every byte. What is buffered never exceeds one unfinished message
 * (≤ 65,537 bytes) plus the unread rest of the last chunk.
 */
export class FrameReader {
  private chunks: Buffer[] = [];
  private buffered = 0;
  /** The length of the message being read; null while its length field is still to come. */
  private length: number | null = null;

  constructor(private readonly minLength: number) {}

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.buffered += chunk.length;
  }

  get bufferedBytes(): number {
    return this.buffered;
  }

  next(): Frame {
    if (this.length === null) {
      if (this.buffered < 2) return 'incomplete';
      this.length = this.take(2).readUInt16BE(0);
      // RFC 7766 §8 gives no meaning to an empty frame; a shorter-than-header one cannot hold a message.
      if (this.length === 0) return 'zero-length';
      if (this.length < this.minLength) return 'too-short';
    }
    if (this.buffered < this.length) return 'incomplete';
    const message = this.take(this.length);
    this.length = null;
    return message;
  }

  /** Removes and returns the first `n` buffered bytes (n ≤ buffered), copying only when they span chunks. */
  private take(n: number): Buffer {
    this.buffered -= n;
    const first = this.chunks[0];
    if (first.length >= n) {
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
      return first.subarray(0, n);
    }
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    while (filled < n) {
      const chunk = this.chunks[0];
      const count = Math.min(chunk.length, n - filled);
      chunk.copy(out, filled, 0, count);
      filled += count;
      if (count === chunk.length) this.chunks.shift();
      else this.chunks[0] = chunk.subarray(count);
    }
    return out;
  }
}
