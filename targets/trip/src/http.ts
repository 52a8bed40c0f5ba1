// A minimal JSON HTTP server on node:http: the workload API of trips and
// /healthz on every process.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

export interface Req {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingMessage['headers'];
  body: () => Promise<string>;
}

export interface Res {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

export type Route = (req: Req, params: string[]) => Promise<Res>;

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export function apiError(status: number, code: string, error: string): Res {
  return { status, body: { code, error } };
}

/**
 * Routes are matched in order; a pattern segment ":x" captures one path
 * segment. The array is read per request: a process binds its port first and
 * adds its routes once its schema is in place (until then, 404 and an
 * unready /healthz).
 */
export function newServer(routes: Array<[string, string, Route]>, ready: () => boolean): Server {
  const compile = () =>
    routes.map(([method, pattern, fn]) => ({ method, re: new RegExp('^' + pattern.replace(/:[a-z]+/g, '([^/]+)') + '$'), fn }));
  return createServer((req: IncomingMessage, res: ServerResponse) => {
    const compiled = compile();
    const url = new URL(req.url ?? '/', 'http://x');
    const send = (r: Res) => {
      const payload = typeof r.body === 'string' ? r.body : JSON.stringify(r.body);
      res.writeHead(r.status, { 'content-type': typeof r.body === 'string' ? 'text/plain' : 'application/json', ...(r.headers ?? {}) });
      res.end(payload);
    };
    if (req.method === 'GET' && url.pathname === '/healthz') {
      send(ready() ? { status: 200, body: 'ok\n' } : { status: 503, body: 'starting\n' });
      return;
    }
    const body = () =>
      new Promise<string>((resolve, reject) => {
        let size = 0;
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => {
          size += c.length;
          if (size > 1 << 20) reject(new HttpError(413, 'bad_request', 'body too large'));
          else chunks.push(c);
        });
        req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
        req.on('error', reject);
      });
    if (!ready()) {
      // Bound but still starting: "try again", never "no such route", so a
      // client retries instead of giving up on its trip.
      send(apiError(503, 'unavailable', 'starting'));
      return;
    }
    for (const r of compiled) {
      if (r.method !== req.method) continue;
      const m = r.re.exec(url.pathname);
      if (m === null) continue;
      const params = m.slice(1).map(decodeURIComponent);
      r.fn({ method: req.method, path: url.pathname, query: url.searchParams, headers: req.headers, body }, params).then(send, (e: unknown) => {
        if (e instanceof HttpError) send(apiError(e.status, e.code, e.message));
        else send(apiError(503, 'unavailable', e instanceof Error ? e.message : String(e)));
      });
      return;
    }
    send(apiError(404, 'not_found', `no route for ${req.method} ${url.pathname}`));
  });
}

/** Listens on host:port; rejects (instead of throwing later) if the address is taken. */
export function listen(server: Server, addr: string): Promise<void> {
  const i = addr.lastIndexOf(':');
  const host = addr.slice(0, i) || '127.0.0.1';
  const port = Number(addr.slice(i + 1));
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}
