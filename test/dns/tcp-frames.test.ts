// Splitting a DNS-over-TCP byte stream into messages (RFC 7766 §8), however its chunks are cut.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FrameReader, type Frame } from '../../src/dns/tcp-frames.ts';

function framed(body: Buffer): Buffer {
  const length = Buffer.alloc(2);
  length.writeUInt16BE(body.length);
  return Buffer.concat([length, body]);
}

function drain(reader: FrameReader): Frame[] {
  const out: Frame[] = [];
  for (let frame = reader.next(); frame !== 'incomplete'; frame = reader.next()) out.push(frame);
  return out;
}

describe('FrameReader', () => {
  const first = Buffer.alloc(20, 1);
  const second = Buffer.alloc(300, 2);
  const stream = Buffer.concat([framed(first), framed(second)]);

  it('reads messages whole from one chunk or from a byte at a time', () => {
    const whole = new FrameReader(12);
    whole.push(stream);
    assert.deepEqual(drain(whole), [first, second]);

    const dribbled = new FrameReader(12);
    const frames: Frame[] = [];
    for (const byte of stream) {
      dribbled.push(Buffer.from([byte]));
      frames.push(...drain(dribbled));
    }
    assert.deepEqual(frames, [first, second]);
    assert.equal(dribbled.bufferedBytes, 0);
  });

  it('reports a zero-length frame and one too short for a header as soon as the length arrives', () => {
    const empty = new FrameReader(12);
    empty.push(Buffer.from([0, 0, 9, 9]));
    assert.equal(empty.next(), 'zero-length');
    const short = new FrameReader(12);
    short.push(Buffer.from([0, 5]));
    assert.equal(short.next(), 'too-short');
  });

  it('holds an unfinished 65535-byte message until its last byte', () => {
    const reader = new FrameReader(12);
    const big = framed(Buffer.alloc(65_535, 7));
    reader.push(big.subarray(0, 40_000));
    assert.equal(reader.next(), 'incomplete');
    reader.push(big.subarray(40_000));
    const frame = reader.next();
    assert.ok(Buffer.isBuffer(frame) && frame.length === 65_535);
  });
});
