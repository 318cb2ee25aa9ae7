export { BoundedCapture } from './capture.js';
export { type CollectorOptions, OutputCollector } from './collector.js';
