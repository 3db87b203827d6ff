import HealthLedgerRPC
import LedgerSchema
import Logging
import NIOCore
import SwiftProtobuf

/// One client connection: opens a task per call, routes cancels and window updates to
/// them, answers pings, refuses calls beyond the limit or while draining, and closes the
/// connection when its byte stream can no longer be trusted or it idles.
final class ServerConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = InboundFrame
    typealias OutboundOut = Healthledger_V1_Frame

    private struct ActiveCall {
        let task: Task<Void, Never>
        let window: StreamWindow?
        /// The deadline; none for a long-running call that set none.
        let timer: Scheduled<Void>?
        let deadline: CallDeadline
        /// Runs until cancelled (a watch or observer): a drain ends it at once.
        let longRunning: Bool
    }

    private let dispatcher: CallDispatcher
    private let maximumConcurrentCalls: Int
    private let logger: Logger
    private let onClose: @Sendable (ObjectIdentifier) -> Void
    private var calls: [UInt64: ActiveCall] = [:]
    private var draining = false
    private var highestCallID: UInt64 = 0
    private var context: ChannelHandlerContext?
    private var drained: EventLoopPromise<Void>?
    private var inactive = false

    init(dispatcher: CallDispatcher, maximumConcurrentCalls: Int, logger: Logger, onClose: @escaping @Sendable (ObjectIdentifier) -> Void) {
        self.dispatcher = dispatcher
        self.maximumConcurrentCalls = maximumConcurrentCalls
        self.logger = logger
        self.onClose = onClose
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func channelInactive(context: ChannelHandlerContext) {
        inactive = true
        for call in calls.values { call.task.cancel() }
        onClose(ObjectIdentifier(self))
        drained?.succeed()
        drained = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .malformed(let reason):
            context.writeAndFlush(wrapOutboundOut(.status(id: 0, RPCError(.invalidArgument, reason))), promise: nil)
        case .frame(let frame):
            switch frame.kind {
            case .request(let request): open(frame.callID, request, context: context)
            case .cancel: calls[frame.callID]?.task.cancel()
            case .windowUpdate(let update): calls[frame.callID]?.window?.grant(Int(min(update.messages, 1 << 20)))
            case .ping(let ping):
                var pong = Healthledger_V1_Frame()
                pong.pong = .with { $0.nonce = ping.nonce }
                context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
            case .pong, .message, .status, .goAway, nil:
                context.writeAndFlush(
                    wrapOutboundOut(.status(id: frame.callID, RPCError(.invalidArgument, "a client may not send this frame"))), promise: nil)
            }
        }
    }

    private func open(_ id: UInt64, _ request: Healthledger_V1_CallRequest, context: ChannelHandlerContext) {
        guard id != 0 else {
            context.writeAndFlush(wrapOutboundOut(.status(id: 0, RPCError(.invalidArgument, "call id 0 is reserved"))), promise: nil)
            return
        }
        guard !draining else {
            context.writeAndFlush(wrapOutboundOut(.status(id: id, RPCError(.unavailable, "the server is shutting down"))), promise: nil)
            return
        }
        guard calls[id] == nil else {
            // Answered on call 0: a status on `id` would read as the running call's own.
            context.writeAndFlush(wrapOutboundOut(.status(id: 0, RPCError(.invalidArgument, "call id \(id) is already in use"))), promise: nil)
            return
        }
        guard calls.count < maximumConcurrentCalls else {
            context.writeAndFlush(
                wrapOutboundOut(.status(id: id, RPCError(.resourceExhausted, "\(maximumConcurrentCalls) calls are already open on this connection, its limit"))),
                promise: nil)
            return
        }
        highestCallID = max(highestCallID, id)
        let method = RPCMethod(rawValue: request.method)
        let channel = context.channel
        let loop = context.eventLoop
        let dispatcher = dispatcher
        // The response and the status go out in one write, from the event loop; the status
        // ends the call, so its slot is freed in that same turn and a client holding every
        // status may open its next call at once.
        let finished = NIOLoopBound(self, eventLoop: loop)
        let finish: CallDispatcher.Finish = { response, failure in
            let write: @Sendable () -> Void = {
                if let response { channel.write(Healthledger_V1_Frame.message(id: id, response), promise: nil) }
                channel.writeAndFlush(Healthledger_V1_Frame.status(id: id, failure), promise: nil)
                finished.value.finish(id)
            }
            if loop.inEventLoop { write() } else { loop.execute(write) }
        }
        // A read that needs no task is answered in this turn.
        if let method, dispatcher.answerAtOnce(id: id, method: method, request: request, finish: finish) { return }
        let kind = method.map { MethodTable.registration($0).kind }
        let window = kind?.isStreaming == true
            ? StreamWindow(initial: request.initialWindow == 0 ? 16 : Int(min(request.initialWindow, 1 << 20))) : nil
        let deadline = CallDeadline()
        let task = Task {
            await dispatcher.run(
                id: id, method: method, request: request, window: window, deadline: deadline,
                send: { message in channel.writeAndFlush(Healthledger_V1_Frame.message(id: id, message), promise: nil) }, finish: finish)
        }
        // The deadline is a timer on the event loop that cancels the call's task.
        var timer: Scheduled<Void>?
        if request.timeoutMs != 0 || kind != .longRunning {
            let timeout = dispatcher.timeout(milliseconds: request.timeoutMs)
            timer = loop.scheduleTask(in: .nanoseconds(timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000)) {
                deadline.expire()
                task.cancel()
            }
        }
        calls[id] = ActiveCall(task: task, window: window, timer: timer, deadline: deadline, longRunning: kind == .longRunning)
    }

    private func finish(_ id: UInt64) {
        calls.removeValue(forKey: id)?.timer?.cancel()
        if draining, calls.isEmpty { context?.close(promise: nil) }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            // The client sends nothing more: its running calls finish, then the connection closes.
            draining = true
            if calls.isEmpty { context.close(promise: nil) }
            return
        }
        if event is IdleStateHandler.IdleStateEvent, calls.isEmpty {
            logger.debug("closing an idle connection")
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // The byte stream can no longer be trusted: say why, then close.
        let reason = (error as? FrameError).map(\.description) ?? "connection error: \(error)"
        var goAway = Healthledger_V1_Frame()
        goAway.goAway = .with {
            $0.lastCallID = highestCallID
            $0.reason = reason
        }
        logger.debug("closing a connection", metadata: ["reason": "\(reason)"])
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(goAway)).whenComplete { _ in channel.close(promise: nil) }
    }

    /// Refuses new calls, tells the client, and closes once the calls in flight have ended.
    func drain(promise: EventLoopPromise<Void>) {
        guard let context, !inactive else { return promise.succeed() }
        draining = true
        drained = promise
        var goAway = Healthledger_V1_Frame()
        goAway.goAway = .with {
            $0.lastCallID = highestCallID
            $0.reason = "the server is shutting down"
        }
        context.writeAndFlush(wrapOutboundOut(goAway), promise: nil)
        // Long-running calls would never finish by themselves: end them now.
        for call in calls.values where call.longRunning {
            call.deadline.shutDown()
            call.task.cancel()
        }
        if calls.isEmpty { context.close(promise: nil) }
    }

    /// Cancels every call and closes (when draining took too long).
    func forceClose() {
        for call in calls.values { call.task.cancel() }
        context?.close(promise: nil)
    }
}
