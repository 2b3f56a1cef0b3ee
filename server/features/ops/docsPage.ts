/**
 * The rendered docs page (generated/docs.html) and the Content-Security-Policy it is served
 * with. The page is self-contained: Redoc and the contract are inline scripts, its styles are
 * inline and the attribution logo is a data: URI. The policy lets the browser load nothing
 * else: scripts only when their hash is one of the page's own inline scripts, and fetches,
 * images, fonts and frames from this origin (or data:) at most.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

export interface DocsPage {
  html: string;
  contentSecurityPolicy: string;
}

/**
 * Inline script bodies, as the browser hashes them. The generator escapes `</script` inside
 * scripts (build-docs inlines the bundle that way) and the JSON it embeds escapes `<`, so a
 * script ends at the first `</script>`.
 */
export function inlineScripts(html: string): string[] {
  return [...html.matchAll(/<script\b[^>]*>([\s\S]*?)<\/script\s*>/gi)].map((m) => m[1]!);
}

export function docsContentSecurityPolicy(html: string): string {
  const scripts = inlineScripts(html);
  if (scripts.length === 0) throw new Error('docs page has no inline script to allow');
  const hashes = scripts.map((s) => `'sha256-${createHash('sha256').update(s, 'utf8').digest('base64')}'`);
  return [
    "default-src 'self'",
    `script-src ${hashes.join(' ')}`,
    // styled-components writes <style> elements at run time; nothing is loaded from outside.
    // No 'unsafe-eval': Redoc's search probes for it and then indexes without a worker.
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

export function loadDocsPage(path: string): DocsPage {
  const html = readFileSync(path, 'utf8');
  return { html, contentSecurityPolicy: docsContentSecurityPolicy(html) };
}
