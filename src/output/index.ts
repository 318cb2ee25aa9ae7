export { BoundedCapture } from './capture.js';
export { type CollectorOptions, isThenable, OutputCollector, type TextLog } from './collector.js';
export { checkWritable } from './file-sink.js';
