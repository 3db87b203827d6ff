import NIOCore

/// A task executor that runs its jobs on one NIO event loop: the loop a store's connection
/// lives on (``HealthStore/executor``).
///
/// A call made from a task that prefers it writes its request on the connection's own thread,
/// and the answer resumes the task there too, so a call wakes no other thread of the client.
final class EventLoopTaskExecutor: TaskExecutor {
    let loop: any EventLoop

    init(loop: any EventLoop) { self.loop = loop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
