/**
 * A request kept in flight across a shutdown (the process tests): a PATCH of the appearance whose
 * body is half sent, then `signal()` is called, and the rest of the body follows 300 ms later.
 */
import { type Agent, request } from 'node:http';

export interface InFlightAnswer {
  status: number;
  body: string;
  /** The response's Connection header: `keep-alive` when the connection stays open after it. */
  connection: string | undefined;
}

export function patchAcrossSignal(
  baseUrl: string,
  apiKey: string,
  signal: () => void,
  agent?: Agent,
): Promise<InFlightAnswer> {
  const url = new URL('/api/v1/appearance', baseUrl);
  const body = JSON.stringify({ themeMode: 'dark' });
  return new Promise((resolve, reject) => {
    const req = request(
      {
        ...(agent ? { agent } : {}),
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'PATCH',
        headers: {
          Authorization: `Bearer ${apiKey}`,
          'Content-Type': 'application/json',
          'Content-Length': Buffer.byteLength(body),
        },
      },
      (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, connection: res.headers.connection }));
      },
    );
    req.on('error', reject);
    req.write(body.slice(0, 5));
    setTimeout(() => {
      signal();
      setTimeout(() => req.end(body.slice(5)), 300);
    }, 200);
  });
}
