// The edge's TLS helpers on their own: client-certificate subjects as RFC 4514 strings safe in an HTTP field, and
// the key that ties a connection's verdict to an endpoint's CA bundle.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { clientAuthKey, rfc4514Subject } from '../../src/edge/tls.ts';

describe('rfc4514Subject', () => {
  it('puts RDNs last first, joined by ",", with "+" inside a multi-valued RDN', () => {
    assert.equal(rfc4514Subject('C=DE\nO=Edge Tests\nCN=alice'), 'CN=alice,O=Edge Tests,C=DE');
    assert.equal(rfc4514Subject('O=Edge Tests\nCN=a\\, b + UID=7'), 'CN=a\\, b+UID=7,O=Edge Tests');
    assert.equal(rfc4514Subject('CN=alice'), 'CN=alice');
  });

  it('keeps OpenSSL escapes (commas, plus signs, leading and trailing spaces, control bytes) as they are', () => {
    assert.equal(rfc4514Subject('OU=Line\\0ABreak\\01\nCN=\\ lead\\ '), 'CN=\\ lead\\ ,OU=Line\\0ABreak\\01');
    assert.equal(rfc4514Subject('CN=a \\+ b'), 'CN=a \\+ b');
    assert.equal(rfc4514Subject('CN=x\\  + UID=7'), 'CN=x\\ +UID=7');
  });

  it('escapes every byte outside printable ASCII as \\XX of its UTF-8 encoding (RFC 4514 §2.4)', () => {
    assert.equal(rfc4514Subject('O=Édge\nCN=日本'), 'CN=\\E6\\97\\A5\\E6\\9C\\AC,O=\\C3\\89dge');
    assert.equal(rfc4514Subject('CN=a\x7fb\tc'), 'CN=a\\7Fb\\09c');
    assert.match(rfc4514Subject('CN=ü\nO=ß'), /^[\x20-\x7e]+$/);
  });
});

describe('clientAuthKey', () => {
  it('differs by endpoint and by CA bundle, and is stable', () => {
    const a = { uuid: 'a', mtls_ca_pem: 'CA1' };
    assert.equal(clientAuthKey(a), clientAuthKey({ ...a }));
    assert.notEqual(clientAuthKey(a), clientAuthKey({ uuid: 'b', mtls_ca_pem: 'CA1' }));
    assert.notEqual(clientAuthKey(a), clientAuthKey({ uuid: 'a', mtls_ca_pem: 'CA2' }));
    assert.notEqual(clientAuthKey({ uuid: 'a\nCA', mtls_ca_pem: '1' }), clientAuthKey({ uuid: 'a', mtls_ca_pem: 'CA\n1' }));
  });
});
