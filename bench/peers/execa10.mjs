// Resolved from this folder, so `execa` here is bench/peers/node_modules/execa (10), not the root's
// devDependency (9). Loaded by bench/lib/execa10.mjs once it has installed this folder.
export { execa } from 'execa';
