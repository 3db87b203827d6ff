import HealthLedgerRPC
import LedgerSchema
import Logging
import NIOCore
import SwiftProtobuf

/// One client connection: opens a task per call, routes cancels and window updates to
/// them, answers pings, refuses calls beyond the limit or while draining, and closes the
/// connection when its byte stream can no longer be trusted or it idles. Which of these
/// happens is decided by ``ConnectionState``; this handler carries it out.
///
/// It keeps its own idle timer (one timer a connection, moved on only when it fires):
/// NIO's `IdleStateHandler` would watch every write with a promise of its own, a future
/// allocated and completed for each answer.
///
/// It writes its frames as bytes: a call's response and status are written directly into
/// one buffer (``NIOCore/ByteBuffer/writeMessageFrame(id:_:)``), one write for both.
package final class ServerConnectionHandler: ChannelInboundHandler {
    package typealias InboundIn = InboundFrame
    package typealias OutboundOut = ByteBuffer

    /// What a running call holds (a call answered at once holds nothing).
    private struct RunningCall {
        /// Its task; nil for a write answered on commit, which nothing can stop once submitted.
        let task: Task<Void, Never>?
        let window: StreamWindow?
        /// The deadline; none for a long-running call that set none.
        let timer: Scheduled<Void>?
        let deadline: CallDeadline
        /// Runs until cancelled (a watch or observer): a drain ends it at once.
        let longRunning: Bool
    }

    private let dispatcher: CallDispatcher
    private let idleTimeout: Duration
    private let logger: Logger
    private let onClose: @Sendable (ObjectIdentifier) -> Void
    private var state: ConnectionState
    private var running: [UInt64: RunningCall] = [:]
    private var context: ChannelHandlerContext?
    private var drained: EventLoopPromise<Void>?
    /// A read is being handled: answers given in it are flushed once, when the read completes.
    private var reading = false
    /// Answers written and not flushed yet.
    private var unflushed = false
    /// When the connection last read, or last finished its open calls, by the event loop's
    /// clock: it has been idle since then.
    private var lastActivity = NIODeadline.uptimeNanoseconds(0)
    private var idleCheck: Scheduled<Void>?
    /// Streaming calls wait on it while the socket takes no more bytes.
    private let writable = WritableGate()

    package init(
        dispatcher: CallDispatcher, maximumConcurrentCalls: Int, idleTimeout: Duration, logger: Logger,
        onClose: @escaping @Sendable (ObjectIdentifier) -> Void
    ) {
        self.dispatcher = dispatcher
        self.idleTimeout = idleTimeout
        self.logger = logger
        self.onClose = onClose
        state = ConnectionState(maximumCalls: maximumConcurrentCalls)
    }

    package func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { startIdleTimer(context) }
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        idleCheck?.cancel()
        idleCheck = nil
        // The context holds this handler: kept, the two would outlive the connection.
        self.context = nil
    }

    package func channelActive(context: ChannelHandlerContext) {
        startIdleTimer(context)
        context.fireChannelActive()
    }

    // MARK: - Idling

    private func startIdleTimer(_ context: ChannelHandlerContext) {
        guard idleCheck == nil else { return }
        lastActivity = context.eventLoop.now
        checkIdle(at: lastActivity + TimeAmount(idleTimeout), context.eventLoop)
    }

    private func checkIdle(at deadline: NIODeadline, _ loop: any EventLoop) {
        let handler = NIOLoopBound(self, eventLoop: loop)
        idleCheck = loop.scheduleTask(deadline: deadline) { handler.value.idleCheckDue() }
    }

    /// The idle timer fired: the connection closes when it has been idle for the idle
    /// timeout with no call open (after a go-away, so that a request crossing the close on the
    /// wire is known not to have started: its id is above the last call id); otherwise the
    /// timer waits again.
    private func idleCheckDue() {
        guard let context, state.phase != .closed else { return }
        let loop = context.eventLoop
        let due = lastActivity + TimeAmount(idleTimeout)
        if due > loop.now { return checkIdle(at: due, loop) }
        guard let goAway = state.idle(reason: "the connection was idle for \(idleTimeout)") else {
            return checkIdle(at: loop.now + TimeAmount(idleTimeout), loop)
        }
        idleCheck = nil
        logger.debug("closing an idle connection")
        let channel = context.channel
        context.writeAndFlush(bytes(of: goAway, context)).whenComplete { _ in channel.close(promise: nil) }
    }

    package func channelWritabilityChanged(context: ChannelHandlerContext) {
        writable.set(writable: context.channel.isWritable)
        context.fireChannelWritabilityChanged()
    }

    package func channelInactive(context: ChannelHandlerContext) {
        writable.close()
        idleCheck?.cancel()
        idleCheck = nil
        _ = state.inactive()
        for call in running.values { call.task?.cancel() }
        onClose(ObjectIdentifier(self))
        drained?.succeed()
        drained = nil
        context.fireChannelInactive()
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        reading = true
        // A closing connection answers nothing more: no request, ping or malformed frame.
        guard state.phase != .closed else { return }
        switch unwrapInboundIn(data) {
        case .malformed(let reason):
            context.writeAndFlush(bytes(of: .status(id: 0, RPCError(.invalidArgument, reason)), context), promise: nil)
        case .frame(let frame):
            switch frame.kind {
            case .request(let request): open(frame.callID, request, context: context)
            case .cancel: running[frame.callID]?.task?.cancel()
            case .windowUpdate(let update): running[frame.callID]?.window?.grant(Int(min(update.messages, 1 << 20)))
            case .ping(let ping):
                var pong = Healthledger_V1_Frame()
                pong.pong = .with { $0.nonce = ping.nonce }
                context.writeAndFlush(bytes(of: pong, context), promise: nil)
            case .pong, .message, .status, .goAway, nil:
                // On call 0: a status on the frame's own id could end a call still running there.
                context.writeAndFlush(
                    bytes(of: .status(id: 0, RPCError(.invalidArgument, "a client may not send this frame (on call \(frame.callID))")), context),
                    promise: nil)
            }
        }
    }

    /// The end of a read: one flush for every answer written while reading it (many calls
    /// arrive in one read when a client has several in flight).
    package func channelReadComplete(context: ChannelHandlerContext) {
        reading = false
        lastActivity = context.eventLoop.now
        flushAnswers()
        context.fireChannelReadComplete()
    }

    private func flushAnswers() {
        guard unflushed else { return }
        unflushed = false
        context?.flush()
    }

    private func open(_ id: UInt64, _ request: Healthledger_V1_CallRequest, context: ChannelHandlerContext) {
        switch state.admit(id) {
        case .ignore: return
        case .refuse(let callID, let error):
            context.writeAndFlush(bytes(of: .status(id: callID, error), context), promise: nil)
            return
        case .start: break
        }
        let method = RPCMethod(named: request.method)
        let channel = context.channel
        let loop = context.eventLoop
        let dispatcher = dispatcher
        // The response and the status go out in one write, from the event loop; the status
        // ends the call, so its slot is freed in that same turn and a client holding every
        // status may open its next call at once. Answers given while a read is handled are
        // flushed together when it completes.
        let finished = NIOLoopBound(self, eventLoop: loop)
        let finish: CallDispatcher.Finish = { response, failure in
            let write: @Sendable () -> Void = {
                let handler = finished.value
                var answer = channel.allocator.buffer(capacity: (response?.count ?? 0) + (failure?.message.utf8.count ?? 0) + 48)
                if let response { answer.writeMessageFrame(id: id, response) }
                answer.writeStatusFrame(id: id, failure)
                channel.write(answer, promise: nil)
                handler.unflushed = true
                if !handler.reading { handler.flushAnswers() }
                handler.finish(id)
            }
            if loop.inEventLoop { write() } else { loop.execute(write) }
        }
        // A read that needs no task is answered in this turn.
        if let method, dispatcher.answerAtOnce(id: id, method: method, request: request, finish: finish) { return }
        // A small write needs no task either: it is answered when its commit is durable.
        if let method, dispatcher.answersOnCommit(method, request) {
            running[id] = RunningCall(task: nil, window: nil, timer: nil, deadline: CallDeadline(), longRunning: false)
            dispatcher.answerOnCommit(id: id, method: method, request: request, committingOn: { loop.execute($0) }, finish: finish)
            return
        }
        let kind = method.flatMap { MethodTable.registrations[$0]?.kind }
        let window = kind?.isStreaming == true
            ? StreamWindow(initial: request.initialWindow == 0 ? 16 : Int(min(request.initialWindow, 1 << 20))) : nil
        let deadline = CallDeadline()
        let writable = writable
        let task = Task {
            await dispatcher.run(
                id: id, method: method, request: request, deadline: deadline,
                send: { message in
                    try await window?.acquire()
                    try await writable.wait()
                    var frame = channel.allocator.buffer(capacity: message.count + 24)
                    frame.writeMessageFrame(id: id, message)
                    channel.writeAndFlush(frame, promise: nil)
                }, finish: finish)
        }
        // The deadline is a timer on the event loop that cancels the call's task.
        var timer: Scheduled<Void>?
        if request.timeoutMs != 0 || kind != .longRunning {
            let timeout = dispatcher.timeout(milliseconds: request.timeoutMs)
            timer = loop.scheduleTask(in: TimeAmount(timeout)) {
                deadline.expire()
                task.cancel()
            }
        }
        running[id] = RunningCall(task: task, window: window, timer: timer, deadline: deadline, longRunning: kind == .longRunning)
    }

    /// `frame` as the bytes to write.
    private func bytes(of frame: Healthledger_V1_Frame, _ context: ChannelHandlerContext) -> NIOAny {
        var buffer = context.channel.allocator.buffer(capacity: 64)
        buffer.writeFrame(frame)
        return wrapOutboundOut(buffer)
    }

    private func finish(_ id: UInt64) {
        // A call answered at once was never running: the read that brought it is the activity.
        if let call = running.removeValue(forKey: id) {
            call.timer?.cancel()
            if running.isEmpty, let context { lastActivity = context.eventLoop.now }
        }
        if state.ended(id) {
            flushAnswers()
            context?.close(promise: nil)
        }
    }

    package func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            // The client sends nothing more: its running calls finish, then the connection closes.
            if state.inputClosed() { return context.close(promise: nil) }
            // Except long-running calls, which would never finish: the client can no longer
            // cancel them, and a client that closed the whole socket looks the same from here
            // (TCP tells only once the server writes), so they end now.
            for call in running.values where call.longRunning {
                call.deadline.clientClosed()
                call.task?.cancel()
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // The byte stream can no longer be trusted: say why, then close.
        let reason = (error as? FrameError).map(\.description) ?? "connection error: \(error)"
        logger.debug("closing a connection", metadata: ["reason": "\(reason)"])
        let channel = context.channel
        context.writeAndFlush(bytes(of: state.broken(reason: reason), context)).whenComplete { _ in channel.close(promise: nil) }
    }

    /// Refuses new calls, tells the client, and closes once the calls in flight have ended.
    package func drain(promise: EventLoopPromise<Void>) {
        guard let context, let (goAway, closeNow) = state.drain(reason: "the server is shutting down") else { return promise.succeed() }
        drained = promise
        context.writeAndFlush(bytes(of: goAway, context), promise: nil)
        // Long-running calls would never finish by themselves: end them now.
        for call in running.values where call.longRunning {
            call.deadline.shutDown()
            call.task?.cancel()
        }
        if closeNow { context.close(promise: nil) }
    }

    /// Cancels every call and closes (when draining took too long).
    package func forceClose() {
        for call in running.values { call.task?.cancel() }
        context?.close(promise: nil)
    }
}
