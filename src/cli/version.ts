import { readFileSync } from 'node:fs';

/** The version in the package.json shipped next to dist/ (the CLI runs from dist/cli/). */
export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version?: string;
  };
  return pkg.version ?? 'unknown';
}
