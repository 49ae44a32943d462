// One exchange as the edge's traffic recorder takes it, every field at a plain value, for tests of what the
// recorder and the metrics make of exchanges; no test-runner imports.
import type { CapturedExchange } from '../../src/edge/capture.ts';

/** A completed GET of endpoint `e1` answered 200, captured in full; `over` names what a test looks at. */
export function capturedExchange(over: Partial<CapturedExchange> = {}): CapturedExchange {
  return {
    endpoint: 'e1',
    at: new Date(0).toISOString(),
    method: 'GET',
    host: 'h.example',
    path: '/',
    query: '',
    status: 200,
    duration_ms: 1,
    client_ip: '192.0.2.1',
    secure: true,
    rule: null,
    edge_error: null,
    completed: true,
    account: 1,
    hostname: 'h.example',
    time: 0,
    bytes_in: 0,
    bytes_out: 0,
    country: null,
    user_agent: '',
    auth_outcome: null,
    client_id: null,
    level: 'full',
    ...over,
  };
}
