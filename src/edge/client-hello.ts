// The server name (SNI) a TLS ClientHello asks for, read from the first bytes of a connection before TLS starts, so
// the HTTPS listener can hand the connection to that name's TLS context before OpenSSL decides anything about it.
//
// Only the fields on the way to the server_name extension are read (RFC 8446 §4.1.2, RFC 5246 §7.4.1.2, RFC 6066
// §3); OpenSSL still parses and judges the whole ClientHello. Anything unexpected reads as "no name": the connection
// then takes the listener's ordinary TLS path, never a more permissive one.

/** Bytes read at most while looking for the name; ClientHellos are a few KiB, even with post-quantum key shares. */
export const CLIENT_HELLO_MAX_BYTES = 32 * 1024;

/**
 * Records read at most: clients send a ClientHello in one record, two when it is over 16 KiB. A peer splitting it
 * into many tiny ones (RFC 8446 allows it) reads as "no name" rather than costing a re-read per record.
 */
export const CLIENT_HELLO_MAX_RECORDS = 16;

const RECORD_HEADER = 5;
const CONTENT_HANDSHAKE = 22;
const HANDSHAKE_CLIENT_HELLO = 1;
const EXTENSION_SERVER_NAME = 0;
const NAME_TYPE_HOST_NAME = 0;

/**
 * The host name in the ClientHello at the start of `data`: a string when it names one; null when it names none, or
 * `data` does not start with a ClientHello this reader reads (larger than CLIENT_HELLO_MAX_BYTES, or over more than
 * CLIENT_HELLO_MAX_RECORDS records); a number when more bytes are needed: call again once `data` has that many. The
 * name is returned as sent (RFC 6066: ASCII, no trailing dot); callers compare it lower-cased.
 */
export function serverNameOf(data: Buffer): string | null | number {
  const hello = handshakeMessage(data);
  if (hello === null || typeof hello === 'number') return hello;
  return serverNameIn(hello);
}

/**
 * The ClientHello body, joined from the handshake records it spans (RFC 8446 §5.1: a handshake message may be split
 * over several records, and records carry nothing else before it); or null, or how many bytes of `data` it needs.
 */
function handshakeMessage(data: Buffer): Buffer | null | number {
  let offset = 0;
  let have = 0;
  for (let records = 0; records < CLIENT_HELLO_MAX_RECORDS; records++) {
    if (data.length < offset + RECORD_HEADER) return offset + RECORD_HEADER;
    if (data[offset] !== CONTENT_HANDSHAKE) return null;
    const length = data.readUInt16BE(offset + 3);
    // RFC 8446 §5.1: zero-length handshake fragments are not allowed; 2^14 is the plaintext limit.
    if (length === 0 || length > 16_384) return null;
    // The message header, judged as soon as the first record holds it rather than after a record not read anyway.
    if (offset === 0 && data.length >= RECORD_HEADER + 4 && length >= 4 && !plausibleHello(data, RECORD_HEADER)) return null;
    const end = offset + RECORD_HEADER + length;
    if (end > CLIENT_HELLO_MAX_BYTES + CLIENT_HELLO_MAX_RECORDS * RECORD_HEADER) return null;
    if (data.length < end) return end;
    have += length;
    offset = end;
    if (have < 4) continue;
    const message = records === 0 ? data.subarray(RECORD_HEADER, end) : joinFragments(data, offset);
    if (!plausibleHello(message, 0)) return null;
    const bodyLength = message.readUIntBE(1, 3);
    if (have >= bodyLength + 4) return message.subarray(4, 4 + bodyLength);
  }
  return null;
}

/** The fragments of the handshake records in data[0, end), joined. */
function joinFragments(data: Buffer, end: number): Buffer {
  const fragments: Buffer[] = [];
  for (let offset = 0; offset < end; ) {
    const length = data.readUInt16BE(offset + 3);
    fragments.push(data.subarray(offset + RECORD_HEADER, offset + RECORD_HEADER + length));
    offset += RECORD_HEADER + length;
  }
  return Buffer.concat(fragments);
}

/** Whether the handshake message header at `at` (type, 24-bit length) is a ClientHello this reader reads whole. */
function plausibleHello(data: Buffer, at: number): boolean {
  return data[at] === HANDSHAKE_CLIENT_HELLO && data.readUIntBE(at + 1, 3) + 4 <= CLIENT_HELLO_MAX_BYTES;
}

/** The host_name in a ClientHello body; null when it has none or the body is malformed on the way to it. */
function serverNameIn(body: Buffer): string | null {
  // legacy_version (2), random (32), then legacy_session_id<0..32>.
  let p = 2 + 32;
  if (body.length < p + 1) return null;
  p += 1 + body[p];
  // cipher_suites<2..2^16-2>
  if (body.length < p + 2) return null;
  p += 2 + body.readUInt16BE(p);
  // legacy_compression_methods<1..2^8-1>
  if (body.length < p + 1) return null;
  p += 1 + body[p];
  // extensions<8..2^16-1>; a ClientHello without extensions (pre-TLS 1.2 clients) names no server.
  if (body.length < p + 2) return null;
  const end = p + 2 + body.readUInt16BE(p);
  if (end > body.length) return null;
  p += 2;
  while (p + 4 <= end) {
    const type = body.readUInt16BE(p);
    const length = body.readUInt16BE(p + 2);
    p += 4;
    if (p + length > end) return null;
    if (type === EXTENSION_SERVER_NAME) return hostNameIn(body.subarray(p, p + length));
    p += length;
  }
  return null;
}

/** RFC 6066 §3: ServerNameList server_name_list<1..2^16-1>, entries of name_type (1) and HostName<1..2^16-1>. */
function hostNameIn(extension: Buffer): string | null {
  if (extension.length < 2) return null;
  const end = 2 + extension.readUInt16BE(0);
  if (end > extension.length) return null;
  let p = 2;
  while (p + 3 <= end) {
    const type = extension[p];
    const length = extension.readUInt16BE(p + 1);
    p += 3;
    if (p + length > end || length === 0) return null;
    if (type === NAME_TYPE_HOST_NAME) return extension.toString('latin1', p, p + length);
    p += length;
  }
  return null;
}
