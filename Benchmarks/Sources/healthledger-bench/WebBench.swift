import ArgumentParser
import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger

/// The owner's web app: the Summary page's time on a ledger holding a year of per-minute heart
/// rate and daily steps (target: under 100 ms), measured from outside with curl on loopback
/// (`time_total`, the whole page received), against a `healthledgerd` of its own.
struct WebBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "web", abstract: "The owner's web app: the Summary page's time on a year of per-minute heart rate and daily steps.")

    @Option(help: "Days of data, ending now.") var days = 365
    @Option(help: "Page loads; the median and the 90th percentile are reported.") var loads = 30
    @Option(help: "The folder holding a release build of healthledgerd.") var binaries = ".build/release"

    func run() async throws {
        let scratch = FileManager.default.temporaryDirectory.appending(path: "healthledger-web-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let data = scratch.appending(path: "server")
        let (server, credential) = try await ServerProcess.withLedger("web", dataDirectory: data, binaries: binaries, web: true)
        defer { server.stop() }
        guard let webPort = server.webPort else { throw BenchFailure("healthledgerd did not say its web port") }

        // A year of heart rate, one sample a minute, and a step count a day, up to now.
        let store = HealthStore(configuration: HealthStoreConfiguration(port: server.port, credential: credential))
        let heartRate = try QuantityType("HKQuantityTypeIdentifierHeartRate")
        let steps = try QuantityType("HKQuantityTypeIdentifierStepCount")
        let end = Date().timeIntervalSince1970.rounded(.down)
        let minutes = days * 1440
        let clock = ContinuousClock()
        let loading = clock.now
        try await pipelinedBatches(count: minutes) { range in
            _ = try await store.save(try range.map { minute in
                let time = Date(timeIntervalSince1970: end - Double(minutes - minute) * 60)
                return .quantitySample(QuantitySample(type: heartRate, quantity: try Quantity(Double(55 + minute % 90), "count/min"), start: time, end: time))
            })
        }
        _ = try await store.save(try (0..<days).map { day in
            let start = Date(timeIntervalSince1970: end - Double(days - day) * 86_400)
            return .quantitySample(QuantitySample(type: steps, quantity: try Quantity(Double(4000 + day * 7 % 6000), "count"), start: start, end: start.addingTimeInterval(3600)))
        })
        await store.close()
        print(String(format: "== loaded %d heart-rate samples and %d step counts in %.1f s", minutes, days, seconds(clock.now - loading)))

        let jar = scratch.appending(path: "cookies").path
        let url = "http://127.0.0.1:\(webPort)"
        let signIn = try Self.curl(["-c", jar, "-o", "/dev/null", "-w", "%{http_code}", "--data-urlencode", "credential=\(credential)", "\(url)/sign-in"])
        guard signIn == "303" else { throw BenchFailure("sign-in answered \(signIn)") }
        var times: [Double] = []
        for _ in 0..<loads {
            let output = try Self.curl(["-b", jar, "-o", "/dev/null", "-w", "%{http_code} %{time_total}", "\(url)/"])
            let parts = output.split(separator: " ")
            guard parts.first == "200", let time = parts.last.flatMap({ Double($0) }) else { throw BenchFailure("the summary answered \(output)") }
            times.append(time * 1000)
        }
        times.sort()
        print(String(format: "RESULT summary page, %d days of per-minute heart rate and daily steps: median %.1f ms, p90 %.1f ms (target < 100 ms)",
                     days, percentile(times, 0.5), percentile(times, 0.9)))
    }

    static func curl(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(filePath: "/usr/bin/curl")
        process.arguments = ["-s"] + arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}
