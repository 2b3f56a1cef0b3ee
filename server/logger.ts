import { pino, type DestinationStream, type Logger } from 'pino';

/** Structured JSON logs. Authorization headers are never logged (and redacted should one slip in). */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { service: 'account-data-api' },
    redact: {
      paths: ['req.headers.authorization', 'headers.authorization', 'apiKey', '*.apiKey'],
      censor: '[redacted]',
    },
  };
  return destination ? pino(options, destination) : pino(options);
}
