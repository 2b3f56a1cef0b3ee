/**
 * What an HTML page says about itself, for link previews: Open Graph (`og:*`), then the Twitter card
 * (`twitter:*`), then `<title>` and `<meta name="description">`. Read with htmlparser2's streaming
 * parser, a chunk at a time, stopping at `<body>` (metadata lives in the head) — never with regular
 * expressions over the markup.
 */
import { Parser } from 'htmlparser2';

export interface PageMetadata {
  title: string | null;
  description: string | null;
  siteName: string | null;
  /** Absolute http(s) URL of the page's image, resolved against the page's URL. */
  image: string | null;
}

/** Lengths a preview keeps (the contract's maxima). */
export const METADATA_LIMITS = { title: 300, description: 1000, siteName: 200, url: 2048 } as const;

const CHUNK = 64 * 1024;

/** Meta tags, by `property` or `name`, in the order they are preferred for each field. */
const SOURCES = {
  title: ['og:title', 'twitter:title'],
  description: ['og:description', 'twitter:description', 'description'],
  siteName: ['og:site_name'],
  image: ['og:image:secure_url', 'og:image:url', 'og:image', 'twitter:image', 'twitter:image:src'],
} as const;

const WANTED = new Set<string>(Object.values(SOURCES).flat());

/** Whitespace runs collapsed, trimmed, cut to `max` characters (whole code points); null when empty. */
function clean(value: string | undefined, max: number): string | null {
  if (value === undefined) return null;
  const text = value.replace(/\s+/g, ' ').trim();
  if (text === '') return null;
  const chars = [...text];
  return chars.length > max ? chars.slice(0, max).join('') : text;
}

function absoluteHttpUrl(value: string | undefined, base: string): string | null {
  if (!value) return null;
  try {
    const url = new URL(value.trim(), base);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
    return url.href.length <= METADATA_LIMITS.url ? url.href : null;
  } catch {
    return null;
  }
}

/** The charset a Content-Type names, if TextDecoder knows it; UTF-8 otherwise. */
export function decodeHtml(body: Buffer, contentType: string | null): string {
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? '')?.[1];
  if (charset) {
    try {
      return new TextDecoder(charset).decode(body);
    } catch {
      // An unknown label: read it as UTF-8 below.
    }
  }
  return new TextDecoder('utf-8').decode(body);
}

/** The metadata of `html` (a page, or its first bytes), with relative image URLs resolved against `pageUrl`. */
export function extractMetadata(html: string, pageUrl: string): PageMetadata {
  const found = new Map<string, string>();
  let title: string | undefined;
  let inTitle = false;
  let titleText = '';
  // <title> inside <svg> names the drawing, not the page.
  let svgDepth = 0;
  // The head is over: later events (of the chunk being parsed) are ignored, and no more chunks are written.
  let done = false;
  const parser = new Parser(
    {
      onopentag(name, attributes) {
        if (done) return;
        if (name === 'body') {
          done = true;
          return;
        }
        if (name === 'svg') svgDepth++;
        else if (name === 'title' && svgDepth === 0 && title === undefined) {
          inTitle = true;
          titleText = '';
        } else if (name === 'meta') {
          const key = (attributes.property ?? attributes.name ?? '').trim().toLowerCase();
          const content = attributes.content;
          if (content !== undefined && WANTED.has(key) && !found.has(key)) found.set(key, content);
        }
      },
      ontext(text) {
        if (inTitle && !done) titleText += text;
      },
      onclosetag(name) {
        if (done) return;
        if (name === 'svg' && svgDepth > 0) svgDepth--;
        else if (name === 'title' && inTitle) {
          inTitle = false;
          title = titleText;
        } else if (name === 'head') done = true;
      },
    },
    { decodeEntities: true, lowerCaseTags: true, lowerCaseAttributeNames: true },
  );
  for (let at = 0; at < html.length && !done; at += CHUNK) parser.write(html.slice(at, at + CHUNK));
  parser.end();
  // A title cut off by the end of the input still counts.
  if (title === undefined && inTitle) title = titleText;
  const first = (keys: readonly string[]) =>
    keys.map((k) => found.get(k)).find((v) => v !== undefined && v.trim() !== '');
  return {
    title: clean(first(SOURCES.title) ?? title, METADATA_LIMITS.title),
    description: clean(first(SOURCES.description), METADATA_LIMITS.description),
    siteName: clean(first(SOURCES.siteName), METADATA_LIMITS.siteName),
    image: absoluteHttpUrl(first(SOURCES.image), pageUrl),
  };
}
