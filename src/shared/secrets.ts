// Sealing secrets at rest (certificate private keys) with AES-256-GCM under the node's EDGE_SECRET_KEY.
// Control seals before storing; edges unseal what the feed hands them, so a database or Redis dump alone leaks nothing.
import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';

const VERSION = 'v1';

export class SecretBox {
  private readonly key: Buffer;

  /** Any string works as the secret; it is stretched to 256 bits with SHA-256 (it should carry that much entropy). */
  constructor(secret: string) {
    if (!secret) throw new Error('SecretBox needs a non-empty secret');
    this.key = createHash('sha256').update('edge-secret-box:').update(secret).digest();
  }

  seal(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [VERSION, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), body.toString('base64url')].join('.');
  }

  /**
   * A 256-bit key for one purpose, derived from the box key (HMAC with a label, in the manner of HKDF-Expand, RFC
   * 5869 §2.3), so every node that shares EDGE_SECRET_KEY shares it and no second secret has to be distributed.
   * Distinct purposes give unrelated keys; none of them reveals the sealing key.
   */
  derive(purpose: string): Buffer {
    if (!purpose) throw new Error('SecretBox.derive needs a purpose');
    return createHmac('sha256', this.key).update('edge-derive:').update(purpose).digest();
  }

  /** Throws when the value was sealed under another key or tampered with. */
  open(sealed: string): string {
    const [version, iv, tag, body] = sealed.split('.');
    if (version !== VERSION || !iv || !tag || body === undefined) throw new Error('not a sealed secret');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
  }
}
