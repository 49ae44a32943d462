// Which screen answers which console URL, first match wins. Parameters (`:id`) reach the screen as props, with the
// query string as `query` and the signed-in caller (GET /v1/me) as `me`.
import { EndpointList } from './screens/endpoints.js';
import { EndpointScreen } from './screens/endpoint.js';
import { RecentErrors } from './screens/errors.js';
import { AlertList, AlertScreen } from './screens/alerts.js';
import { AccountScreen } from './screens/account.js';

export const ROUTES = [
  ['/endpoints', EndpointList],
  ['/endpoints/:id/traffic/:request?', (props) => EndpointScreen({ ...props, tab: 'traffic' })],
  ['/endpoints/:id/:tab?', EndpointScreen],
  ['/traffic/errors', RecentErrors],
  ['/alerts', AlertList],
  ['/alerts/:id', AlertScreen],
  ['/account', AccountScreen],
];
