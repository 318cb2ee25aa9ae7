export { Deliverer, type Delivery, defaultSend, type SendSignal } from './deliver.js';
export { Guard } from './guard.js';
export { type KillTarget, type TerminatePlan, terminate } from './terminate.js';
export { type TerminateTreeOptions, terminateTree } from './tree.js';
