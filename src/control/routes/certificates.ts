// Placeholder replaced by the certificate library and endpoint TLS routes.
import type { ControlApp, ControlDeps } from '../http.ts';

export function certificateRoutes(_app: ControlApp, _deps: ControlDeps): void {}
