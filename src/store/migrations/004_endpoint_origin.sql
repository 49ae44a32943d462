-- An endpoint may forward to an origin URL instead of agents (the edge's keep-alive pool to that origin).
ALTER TABLE endpoints ADD COLUMN origin_url text CHECK (origin_url IS NULL OR length(origin_url) <= 2048);
