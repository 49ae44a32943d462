// A real SMTP server for alert e-mail tests (smtp-server, plain SMTP on an ephemeral loopback port, no TLS or auth):
// keeps every message whole, with its envelope; `refuse` makes the next recipients fail with an SMTP reply code.
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

export interface ReceivedMail {
  from: string;
  to: string[];
  raw: string;
}

export interface TestSmtpServer {
  url: string;
  messages: ReceivedMail[];
  /** The next `count` RCPT TO commands are answered with `code` (a 5xx is permanent, a 4xx temporary). */
  refuse(code: number, count?: number): void;
  close(): Promise<void>;
}

export async function startSmtpServer(): Promise<TestSmtpServer> {
  const messages: ReceivedMail[] = [];
  let refusals: number[] = [];
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onRcptTo(address, _session, callback) {
      const code = refusals.shift();
      if (code === undefined) return callback();
      callback(Object.assign(new Error(`refused ${address.address}`), { responseCode: code }));
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        messages.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks).toString('utf8'),
        });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.server.address() as AddressInfo).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    refuse: (code, count = 1) => {
      refusals = [...refusals, ...Array.from({ length: count }, () => code)];
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
