#!/usr/bin/env node
// The entry does one thing before loading the CLI: it starts recording stop signals meant for a
// command we are about to run (early-signals.ts). Both imports are small and import nothing.
import { recordEarlySignals } from './early-signals.js';
import { invocation, PASSES_SIGNALS_ON } from './invocation.js';

const asked = invocation(process.argv.slice(2), process.argv[1]);
const early = recordEarlySignals(PASSES_SIGNALS_ON.includes(asked.name ?? ''));
import('./dispatch.js').then(({ dispatch }) => dispatch(asked, early));
