import { createRequire } from 'node:module';

/**
 * Builtins loaded when first used, not at import: `child_process` (with the `net` and stream
 * modules under it) is 6-8 ms of start-up, a third of what `import('procwarden')` costs, and a
 * program that imports procwarden at start-up may spawn much later, or never. The first spawn
 * pays it instead, as a raw `child_process.spawn` does. process.getBuiltinModule (Node 20.16+,
 * 22.3+) hands a builtin out synchronously; createRequire stands in before that. Node keeps every
 * builtin it has loaded, so a later call is a lookup.
 */
const load: (id: string) => unknown = process.getBuiltinModule ?? createRequire(import.meta.url);

export const childProcess = () => load('node:child_process') as typeof import('node:child_process');
export const net = () => load('node:net') as typeof import('node:net');
export const tty = () => load('node:tty') as typeof import('node:tty');
export const util = () => load('node:util') as typeof import('node:util');
