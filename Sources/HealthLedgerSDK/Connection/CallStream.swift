import HealthLedgerRPC
import Synchronization

/// A server stream's raw messages. A refusal that names the ledger's primary before any
/// message came (a cluster member that keeps no copy of the ledger, or a follower asked for a
/// write) opens the call again there, as a unary call follows it.
struct CallStream: AsyncSequence, Sendable {
    typealias Element = [UInt8]

    let first: AsyncThrowingStream<[UInt8], any Error>
    /// Opens the call again at the primary `refusal` names.
    let reopen: @Sendable (_ refusal: RPCError) async throws -> AsyncThrowingStream<[UInt8], any Error>

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<[UInt8], any Error>.AsyncIterator
        let reopen: @Sendable (RPCError) async throws -> AsyncThrowingStream<[UInt8], any Error>
        var received = false
        var redirects = 0

        mutating func next() async throws -> [UInt8]? {
            while true {
                do {
                    let message = try await base.next()
                    received = true
                    return message
                } catch let refusal as RPCError
                    where !received && refusal.code == .failedPrecondition && refusal.primary != nil && redirects < HealthStore.primaryRedirects
                {
                    redirects += 1
                    base = try await reopen(refusal).makeAsyncIterator()
                    received = false
                }
            }
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: first.makeAsyncIterator(), reopen: reopen) }
}

/// The connection and id a stream's call runs under now: where its flow-control grants go.
final class StreamCall: Sendable {
    private let current = Mutex<(connection: ClientConnection, id: UInt64)?>(nil)

    var connection: ClientConnection? { current.withLock { $0?.connection } }

    func runs(on connection: ClientConnection, as id: UInt64) {
        current.withLock { $0 = (connection, id) }
    }

    /// Grants the server one more message of the call.
    func grant() {
        guard let (connection, id) = current.withLock({ $0 }) else { return }
        connection.grant(id, 1)
    }
}
