/**
 * The `code` and `message` of an error body, for tests about those two: a 400 for invalid input also
 * carries `details`, which test/validationDetails.test.ts and test/errors.test.ts check.
 */
export function codeAndMessage(body: unknown): { code: unknown; message: unknown } {
  const { code, message } = body as { code?: unknown; message?: unknown };
  return { code, message };
}
