// UDP over the tunnel: datagrams framed with a 2-byte length on a CONNECT stream, one stream per visitor flow.
// The edge and the agent frame and parse the same way; the stream's own flow control paces both directions.
//
// Wire format (docs/tunnels.md "UDP"): each datagram is `length (uint16, big-endian) || payload`, length 0..65535.
// A zero-length datagram is legal UDP and is carried as the two bytes 00 00. Frames may be split or joined freely
// by the byte stream; the decoder reassembles them. A stream that ends inside a frame is truncated and reported.

/** Largest payload one frame carries: the 16-bit length. Real UDP payloads stop at 65,507 (IPv4) anyway. */
export const MAX_DATAGRAM_BYTES = 0xffff;

/** The frame for one datagram. */
export function encodeDatagram(payload: Uint8Array): Buffer {
  if (payload.length > MAX_DATAGRAM_BYTES) throw new RangeError(`datagram of ${payload.length} bytes exceeds ${MAX_DATAGRAM_BYTES}`);
  const frame = Buffer.allocUnsafe(2 + payload.length);
  frame.writeUInt16BE(payload.length, 0);
  frame.set(payload, 2);
  return frame;
}

/** Reassembles datagrams from arbitrary chunks of the byte stream; holds at most one partial frame. */
export class DatagramDecoder {
  private buffered: Buffer = Buffer.alloc(0);

  constructor(private readonly onDatagram: (payload: Buffer) => void) {}

  push(chunk: Buffer): void {
    let data = this.buffered.length > 0 ? Buffer.concat([this.buffered, chunk]) : chunk;
    while (data.length >= 2) {
      const length = data.readUInt16BE(0);
      if (data.length < 2 + length) break;
      // A copy, so a small datagram does not pin the whole chunk it arrived in.
      this.onDatagram(Buffer.from(data.subarray(2, 2 + length)));
      data = data.subarray(2 + length);
    }
    this.buffered = data.length > 0 ? Buffer.from(data) : Buffer.alloc(0);
  }

  /** Bytes of an incomplete frame still waiting; non-zero at end of stream means the peer cut a frame. */
  get pendingBytes(): number {
    return this.buffered.length;
  }
}
