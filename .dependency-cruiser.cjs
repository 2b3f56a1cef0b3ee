/**
 * Layering rules (issue 10, ARCHITECTURE.md §2), checked by `npm run check`:
 * HTTP edge → services → repos, cross-cutting modules called, never copied.
 */
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Modules of the server must not depend on each other in a cycle.',
      from: { path: '^server/' },
      to: { circular: true },
    },
    {
      name: 'handlers-no-sql',
      severity: 'error',
      comment: 'A handler maps HTTP to a service call: it never builds SQL or reaches a repository.',
      from: { path: '^server/features/[^/]+/handlers\\.ts$' },
      to: { path: ['^server/features/[^/]+/repo\\.ts$', '^server/db/', '(^|/)node_modules/knex/'] },
    },
    {
      name: 'repos-not-http',
      severity: 'error',
      comment: 'A repository knows SQL, never HTTP.',
      from: { path: '(^server/features/[^/]+/repo\\.ts$|^server/db/)' },
      to: { path: '^server/http/' },
    },
    {
      name: 'features-not-http',
      severity: 'error',
      comment:
        'Services and repositories use server/core (errors, scopes, context), never the HTTP edge; only handlers.ts may.',
      from: { path: '^server/features/', pathNot: '^server/features/[^/]+/handlers\\.ts$' },
      to: { path: '^server/http/' },
    },
    {
      name: 'http-not-features',
      severity: 'error',
      comment: 'The HTTP pipeline does not know the areas; server/handlers.ts and server/app.ts wire them.',
      from: { path: '^server/http/' },
      to: { path: '^server/features/' },
    },
    {
      name: 'core-is-a-leaf',
      severity: 'error',
      comment:
        'server/core is what every layer shares; it depends on none of them (only on the settings type, the storage interface and the sql tag, itself a leaf that keyset pagination builds with).',
      from: { path: '^server/core/' },
      to: {
        path: '^server/',
        pathNot: ['^server/core/', '^server/config\\.ts$', '^server/storage/types\\.ts$', '^server/db/sql\\.ts$'],
      },
    },
    {
      name: 'features-through-entry-points',
      severity: 'error',
      comment: "One area uses another only through that area's public entry point (features/<area>/index.ts).",
      from: { path: '^server/features/([^/]+)/' },
      to: {
        path: '^server/features/([^/]+)/',
        pathNot: ['^server/features/$1/', '^server/features/[^/]+/index\\.ts$'],
      },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '^(generated|dist|client/dist)/' },
  },
};
