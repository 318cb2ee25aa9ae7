export { BoundedCapture } from './capture.js';
export { type CollectorOptions, OutputCollector } from './collector.js';
export { checkWritable } from './file-sink.js';
