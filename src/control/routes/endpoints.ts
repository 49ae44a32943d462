// Placeholder replaced by the endpoint lifecycle routes.
import type { ControlApp, ControlDeps } from '../http.ts';

export function endpointRoutes(_app: ControlApp, _deps: ControlDeps): void {}
