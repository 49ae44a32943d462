// The status of an upstream's answer (an agent's HTTP/2 `:status`, an origin's status line), judged before it reaches
// res.writeHead, which throws on a code outside 100-999 from inside a listener where nothing would catch it.

/**
 * `value` as a final status the edge relays, or null: an integer of 200-599, RFC 9110 §15's final classes. An agent
 * or an origin is not trusted with the edge's process: HTTP/2 carries any digits in `:status`, and `099` made
 * writeHead throw in the tunnel stream's 'response' listener and took the edge down. 1xx answers are interim, never
 * final: Node reports them apart ('headers', 'continue'; undici and Node's client consume them), and RFC 9113 §8.6
 * has no 101 in HTTP/2, so one arriving as a response is refused like 6xx-9xx, which name no class at all.
 */
export function finalStatus(value: unknown): number | null {
  return typeof value === 'number' && Number.isInteger(value) && value >= 200 && value <= 599 ? value : null;
}
