-- Visitor auth's `enforce_https` (docs/api.md "Endpoint auth settings"): plain HTTP is redirected to HTTPS at the edge.
-- A column on the endpoint, published in its snapshot, so the edge compiles the redirect stage from it.
ALTER TABLE endpoints ADD COLUMN enforce_https boolean NOT NULL DEFAULT false;
