import Foundation
import Synchronization

/// Something a ``ProcessTicker`` gives a turn to every interval until it stops.
protocol TickerMember: AnyObject, Sendable {
    /// Whether it is done: the ticker forgets it.
    var isStopped: Bool { get }
    /// Its periodic work, on the ticker's queue.
    func turn()
}

/// One timer of the process for a kind of periodic work of every open ledger (polling for
/// other processes' commits, writing access records), on a queue of its own, off the
/// threads that answer calls: a server holding thousands of open ledgers wakes once an
/// interval, not thousands of times.
final class ProcessTicker: @unchecked Sendable {
    private static let tickers = Mutex<[String: ProcessTicker]>([:])

    private let source: any DispatchSourceTimer
    private let members = Mutex<[ObjectIdentifier: any TickerMember]>([:])

    /// The ticker named `label` with that interval, started on first use.
    static func shared(_ label: String, every interval: Duration) -> ProcessTicker {
        tickers.withLock { tickers in
            let key = "\(label)/\(interval)"
            if let ticker = tickers[key] { return ticker }
            let ticker = ProcessTicker(label, every: interval)
            tickers[key] = ticker
            return ticker
        }
    }

    private init(_ label: String, every interval: Duration) {
        source = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "healthledger.\(label)", qos: .utility))
        let milliseconds = max(Int(interval.components.seconds * 1000 + interval.components.attoseconds / 1_000_000_000_000_000), 1)
        source.schedule(deadline: .now() + .milliseconds(milliseconds), repeating: .milliseconds(milliseconds))
        // Tickers live as long as the process.
        source.setEventHandler { [self] in
            let current = members.withLock { members in
                members = members.filter { !$0.value.isStopped }
                return Array(members.values)
            }
            for member in current { member.turn() }
        }
        source.resume()
    }

    func register(_ member: any TickerMember) {
        members.withLock { $0[ObjectIdentifier(member)] = member }
    }
}
