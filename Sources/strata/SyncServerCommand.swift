import ArgumentParser
import Foundation
import StrataSync

/// `strata sync-server`: what an operator does to a sync server (see
/// `SyncServer`): install or upgrade its layout, share zones.
struct SyncServerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-server",
        abstract: "Install or upgrade a sync server's layout, share zones between roles, list set-aside changes.",
        subcommands: [Install.self, Grant.self, Revoke.self, SetAside.self])

    /// The server to connect to; the password comes from `PGPASSWORD`, as
    /// with `psql`, so that it is in no command line.
    struct Connection: ParsableArguments {
        @Option(help: "The server, as postgres://user@host:port/database (the password from PGPASSWORD).")
        var url: String

        func server() throws -> SyncServer {
            try SyncServer(url: url, password: ProcessInfo.processInfo.environment["PGPASSWORD"])
        }
    }

    struct Install: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create the strata_sync layout, or upgrade an older one (devices need no DDL rights).")

        @OptionGroup var connection: Connection

        func run() throws {
            try running {
                let server = try connection.server()
                let done = try waiting { try await server.install() }
                let before = done.previousVersion.map { "version \($0)" } ?? "none"
                if done.previousVersion == done.version {
                    print("strata_sync layout: version \(done.version), already installed; functions refreshed")
                } else {
                    print("strata_sync layout: \(before) -> version \(done.version)")
                }
                for step in done.steps { print("  \(step)") }
            }
        }
    }

    struct Grant: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Share a zone with a role (and its members); run as the zone's owner.")

        @OptionGroup var connection: Connection
        @Option(help: "The zone.") var zone: String
        @Option(help: "The role to share it with.") var role: String
        @Flag(help: "Let the role read the zone but not write it.") var readOnly = false

        func run() throws {
            try running {
                let server = try connection.server()
                try waiting { try await server.grant(zone: zone, to: role, readOnly: readOnly) }
                print("zone \(zone): shared with \(role), \(readOnly ? "read-only" : "read-write")")
            }
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop sharing a zone with a role.")

        @OptionGroup var connection: Connection
        @Option(help: "The zone.") var zone: String
        @Option(help: "The role to stop sharing it with.") var role: String

        func run() throws {
            try running {
                let server = try connection.server()
                let removed = try waiting { try await server.revoke(zone: zone, from: role) }
                print(removed ? "zone \(zone): no longer shared with \(role)" : "zone \(zone) was not shared with \(role)")
            }
        }
    }

    struct SetAside: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set-aside",
            abstract: "List the changes devices could not read and set aside (every device moves past them).")

        @OptionGroup var connection: Connection
        @Option(help: "One zone (default: every zone the role may read).") var zone: String?

        func run() throws {
            try running {
                let server = try connection.server()
                let changes = try waiting { [zone] in try await server.setAsideChanges(zone: zone) }
                guard !changes.isEmpty else {
                    print(zone.map { "zone \($0): no change set aside" } ?? "no change set aside")
                    return
                }
                for change in changes {
                    let when = change.date.map { " at \($0.formatted(.iso8601))" } ?? ""
                    print(
                        "zone \(change.zone), change \(change.serverSequence) (device \(change.device.uuidString.lowercased())): "
                            + "\(change.code), \(change.reason); set aside by \(change.setAsideBy)\(when)")
                }
            }
        }
    }
}

/// Runs `body` to its end from synchronous code (the tool's commands are
/// synchronous); returns what it returned or throws what it threw.
@discardableResult
func waiting<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        do { box.result = .success(try await body()) } catch { box.result = .failure(error) }
        done.signal()
    }
    done.wait()
    guard let result = box.result else { throw ToolError("the command ended without a result") }
    return try result.get()
}

/// Where ``waiting(_:)``'s task leaves its result.
private final class ResultBox<T>: @unchecked Sendable {
    // Written by the task before it signals, read after the wait.
    var result: Result<T, any Error>?
}
