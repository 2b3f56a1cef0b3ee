/** What the project says of itself: its license, and the contract's info as the docs page shows it. */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadBundledSpec } from '../server/http/spec.ts';

const root = resolve(import.meta.dirname, '..');
const read = (path: string) => readFileSync(resolve(root, path), 'utf8');

describe('license', () => {
  it('the contract, both package.json files and a LICENSE file beside each say MIT', () => {
    const info = loadBundledSpec().info as { license: { name: string; identifier: string } };
    expect(info.license).toEqual({ name: 'MIT', identifier: 'MIT' });
    expect(JSON.parse(read('package.json')).license).toBe('MIT');
    expect(JSON.parse(read('client/package.json')).license).toBe('MIT');
    const text = read('LICENSE');
    expect(text.startsWith('MIT License\n')).toBe(true);
    expect(text).toContain('Permission is hereby granted, free of charge');
    expect(read('client/LICENSE')).toBe(text); // npm pack ships it with the client package
  });
});

describe('contract info (the docs overview)', () => {
  it('names no placeholder host: every URL in info is one a reader can open', () => {
    const urls = JSON.stringify(loadBundledSpec().info).match(/https?:\/\/[^\s"')\]]+/g) ?? [];
    for (const url of urls)
      expect(new URL(url).hostname).not.toMatch(/(^|\.)(example\.(invalid|com|org|net)|invalid|localhost)$/);
  });
});
