// Package stream classifies CUDA streams so that the rate limiter can treat
// each kind of work as it deserves: collective communication (NCCL) is never
// throttled, because throttling one rank stalls every rank of the job;
// attention kernels, being memory-bound, are throttled 20% less; copies 50%
// less; everything else pays the full price.
//
// A class is a property the caller states when it creates or registers a
// stream; nothing here inspects kernels. The launch path reads a class from a
// field it already holds, so classification costs one load. Raw handles
// created outside the SDK (an NCCL communicator's stream, say) are labelled
// through a Registry.
package stream
