-- Fingerprints of write-only secrets (docs/api.md "Secret fingerprints"): bcrypt (cost 10) of the hex SHA-256 of the
-- secret, written with the secret, so configuration as code can tell an unchanged secret from a changed one without
-- the API returning the secret or a fast hash of it. NULL where no secret is stored, and for secrets stored before this
-- migration (the client then sends the secret once more). Alert channels keep theirs in the channels JSON.

ALTER TABLE endpoint_oauth_providers ADD COLUMN client_secret_fingerprint text
  CONSTRAINT endpoint_oauth_providers_client_secret_fingerprint_check CHECK (client_secret_fingerprint ~ '^\$2[ab]\$[0-9]{2}\$[./A-Za-z0-9]{53}$');

ALTER TABLE endpoint_webhook_verification ADD COLUMN secret_fingerprint text
  CONSTRAINT endpoint_webhook_verification_secret_fingerprint_check
  CHECK (secret_fingerprint IS NULL OR (secret_fingerprint ~ '^\$2[ab]\$[0-9]{2}\$[./A-Za-z0-9]{53}$' AND secret_sealed IS NOT NULL));
