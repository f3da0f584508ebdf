// Closing an HTTP(S) server the way a replica behind a Service must: stop accepting, let the requests in flight
// finish (the API server's webhook and aggregated-API calls), close idle keep-alive connections at once, and cut
// what is still open after `graceMs`.
import type { Server } from 'node:http';

export function closeServer(
  server: Pick<Server, 'close' | 'closeAllConnections' | 'closeIdleConnections'>,
  graceMs = 0,
): Promise<void> {
  return new Promise<void>((resolve) => {
    const cut = setTimeout(() => server.closeAllConnections(), graceMs);
    server.close(() => {
      clearTimeout(cut);
      resolve();
    });
    server.closeIdleConnections();
    if (graceMs <= 0) server.closeAllConnections();
  });
}
