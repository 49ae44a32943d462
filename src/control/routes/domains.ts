// Placeholder replaced by the custom domain routes.
import type { ControlApp, ControlDeps } from '../http.ts';

export function domainRoutes(_app: ControlApp, _deps: ControlDeps): void {}
