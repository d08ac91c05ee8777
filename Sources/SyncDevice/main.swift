// strata-sync-device fill|sync STORE ZONE SOCKET-DIRECTORY PORT USER DATABASE COUNT OUTPUT
//
// A device of the sync fault tests: a process of its own, so that a test
// can kill it with SIGKILL in the middle of a push or a pull.
//
// - `fill`: joins ZONE (no round) and makes COUNT saves of one note each,
//   titled "p<i>"; then appends "filled" to OUTPUT.
// - `sync`: syncs until a round ends with nothing pending, appending
//   "position <p> pending <n>" to OUTPUT every few milliseconds meanwhile
//   and "done <p>" at the end; a round that fails is tried again.
import Foundation
import Strata
import StrataSync

@Model
final class Note {
    var title: String
    var body: String = ""
    var stars: Int = 0
    var due: Date?

    init(title: String, body: String = "", stars: Int = 0, due: Date? = nil) {
        self.title = title
        self.body = body
        self.stars = stars
        self.due = due
    }
}

func fail(_ text: String) -> Never {
    FileHandle.standardError.write(Data("strata-sync-device: \(text)\n".utf8))
    exit(1)
}

let arguments = CommandLine.arguments
guard arguments.count == 10, let port = Int(arguments[5]), let count = Int(arguments[8]) else {
    fail("usage: strata-sync-device fill|sync STORE ZONE SOCKET-DIRECTORY PORT USER DATABASE COUNT OUTPUT")
}
_ = FileManager.default.createFile(atPath: arguments[9], contents: nil)
guard let out = FileHandle(forWritingAtPath: arguments[9]) else { fail("cannot open \(arguments[9])") }
out.seekToEndOfFile()
func say(_ line: String) { out.write(Data((line + "\n").utf8)) }

do {
    let container = try ModelContainer(
        for: Note.self, configurations: ModelConfiguration(url: URL(fileURLWithPath: arguments[2])))
    let configuration = try SyncConfiguration(
        host: nil, port: port, socketDirectory: arguments[4], user: arguments[6], database: arguments[7], tls: .disable,
        zone: arguments[3])
    let engine = try SyncEngine(container: container, configuration: configuration)
    switch arguments[1] {
    case "fill":
        let context = ModelContext(container)
        for index in 0..<count {
            context.insert(Note(title: "p\(index)", stars: index % 5))
            try context.save()
        }
        say("filled")
    case "sync":
        let reporter = Task {
            while !Task.isCancelled {
                let status = engine.status
                say("position \(status.serverPosition) pending \(status.pendingChanges)")
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        var attempts = 0
        while true {
            do {
                try await engine.syncNow()
                if engine.status.pendingChanges == 0 { break }
            } catch {
                attempts += 1
                if attempts > 100 { fail("sync keeps failing: \(error)") }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        reporter.cancel()
        _ = await reporter.result
        say("done \(engine.status.serverPosition)")
    default:
        fail("unknown role \(arguments[1])")
    }
} catch {
    fail("\(error)")
}
