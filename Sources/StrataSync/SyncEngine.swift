import Foundation
import Observation
import Strata
import Synchronization

#if Sync
    import Logging
    import ServiceLifecycle
#endif

/// Keeps a container's store in sync with a zone on a PostgreSQL server:
/// the analog of SwiftData's CloudKit sync, for Linux and any server.
///
/// Saves never wait for the network: each save is recorded in the store's
/// history, which is the outbox, and pushed as one server transaction when
/// the server can be reached. Other devices' changes are applied as saves
/// authored `"sync"` (visible in `fetchHistory`, never pushed back); every
/// context of the container sees them on its next fetch, and
/// ``didApplyRemoteChanges`` announces them.
///
/// Conflicts resolve the same way on every device: the server numbers the
/// zone's changes, and every device applies them in that order, attribute
/// by attribute (two devices that change different attributes of one model
/// both keep their change; for one attribute the later change wins). A
/// delete wins over every change after it.
///
/// ``status`` is observable (Observation) for an app to show.
public final class SyncEngine: Observable, Sendable {
    /// Posted after changes from other devices were applied; the object is
    /// the container, and `userInfo` holds the identifiers under
    /// `ModelContext.NotificationKey` raw values, as `didSave` does.
    public static let didApplyRemoteChanges = Notification.Name("StrataSync.didApplyRemoteChanges")

    /// The `userInfo` key of ``didApplyRemoteChanges`` under which the
    /// models merged by a unique constraint are listed, as `[Merge]`
    /// (present only when there are some).
    public static let mergedModelsKey = "StrataSync.mergedModels"

    /// The `userInfo` key of ``didApplyRemoteChanges`` under which this
    /// device's changes that the zone removed are listed, as `[LostChange]`
    /// (present only when there are some).
    public static let lostChangesKey = "StrataSync.lostChanges"

    /// A change this device saved, not pushed yet or just pushed, that the
    /// zone's order removed. An attribute value saved here never loses to a
    /// pulled one (it comes later in the zone's order); what is lost is a
    /// whole model: one deleted by the zone, directly or by a cascade (an
    /// insert or a move into a folder another device deleted), or one merged
    /// into another model by a unique constraint, found by a pulled change or
    /// by the alignment with the zone copy that ends a round.
    public struct LostChange: Sendable, Hashable {
        /// Why the change was lost.
        public enum Reason: Sendable, Hashable {
            /// The model was deleted by the zone (by another device, or by a
            /// cascade of a delete) with this device's changes to it.
            case deleted
            /// The model merged into `into`, which another device gave the
            /// same values of a unique constraint first: this device's
            /// changed attributes went on top of it, but for those of the
            /// constraint's earlier holder.
            case merged(into: PersistentIdentifier)
        }

        /// The model whose saved changes were lost (deleted in this store).
        public let model: PersistentIdentifier
        /// Why.
        public let reason: Reason

        /// A lost change of `model`.
        public init(model: PersistentIdentifier, reason: Reason) {
            self.model = model
            self.reason = reason
        }
    }

    /// Two models that became one because they came to hold the same values
    /// of a unique constraint (two devices that inserted, or renamed to, the
    /// same unique value). Every device merges them the same way: the model
    /// that held the values first in the zone's order stays, with the other's
    /// changed attributes on top and its relationships joined; the other is
    /// deleted here, and its identifier in the zone names the one that stays.
    public struct Merge: Sendable, Hashable {
        /// The model merged away (deleted in this store).
        public let merged: PersistentIdentifier
        /// The model it merged into.
        public let into: PersistentIdentifier

        /// A merge of `merged` into `into`.
        public init(merged: PersistentIdentifier, into: PersistentIdentifier) {
            self.merged = merged
            self.into = into
        }
    }

    /// The container being synced.
    public let container: ModelContainer
    /// Where it syncs.
    public let configuration: SyncConfiguration

    private let worker: Worker
    private let log: SyncLog
    private let registrar = ObservationRegistrar()
    private let current = Mutex(SyncStatus())
    private let running = Mutex<RunningState?>(nil)
    /// The store left the zone (``leaveZone(keepingData:)``): no round runs.
    private let left = Mutex(false)

    private struct RunningState {
        var loop: Task<Void, Never>
        var listener: Task<Void, Never>
        var saves: (any NSObjectProtocol)?
        var wake: AsyncStream<Void>.Continuation
    }

    /// Sync for `container` with the server and zone of `configuration`.
    /// Nothing is sent before ``start()`` or ``syncNow()``.
    ///
    /// - Throws: ``SyncError`` with code ``SyncError/Code/configuration``
    ///   for a container with several stores when ``SyncConfiguration/store``
    ///   names none of them, a store that records no history or allows no
    ///   saves, or a store that syncs with another zone.
    public convenience init(container: ModelContainer, configuration: SyncConfiguration) throws(SyncError) {
        #if Sync
            let server: any ZoneServer = PostgresZoneServer(configuration: configuration)
        #else
            let server: any ZoneServer = UnavailableServer()
        #endif
        try self.init(container: container, configuration: configuration, server: server)
    }

    #if Sync
        /// As ``init(container:configuration:)``, telling `logger` what sync
        /// does: each round (debug), changes set aside and failed rounds
        /// (warning; error for a refusal), merges and trims (info). Without
        /// a logger StrataSync writes nothing.
        public convenience init(container: ModelContainer, configuration: SyncConfiguration, logger: Logger)
            throws(SyncError)
        {
            try self.init(
                container: container, configuration: configuration,
                server: PostgresZoneServer(configuration: configuration), log: SyncLog(logger: logger))
        }
    #endif

    init(container: ModelContainer, configuration: SyncConfiguration, server: any ZoneServer, log: SyncLog = .silent)
        throws(SyncError)
    {
        self.container = container
        self.configuration = configuration
        self.log = log
        let synced = try Self.store(of: container, named: configuration.store)
        self.synced = synced
        do {
            worker = try Worker(container: synced, zone: configuration.zone, server: server, log: log)
        } catch {
            throw error
        }
        let state = try worker.localState()
        current.withLock { $0.take(state, head: state.position) }
        // Each local save is pending until a round says otherwise.
        let observer = NotificationCenter.default.addObserver(forName: ModelContext.didSave, object: nil, queue: nil) {
            [weak self, container, synced] note in
            guard Self.isLocalSave(note, of: synced, in: container) else { return }
            self?.update { $0.pendingChanges += 1 }
        }
        saveObserver = observer
    }

    /// The store of `container` that an engine syncs: the configuration
    /// named `name` of a container with several stores (its part), or the
    /// container itself.
    private static func store(of container: ModelContainer, named name: String?) throws(SyncError) -> ModelContainer {
        let names = container.parts.compactMap { $0.orderedConfigurations.first?.name }
        guard !container.parts.isEmpty else {
            if let name, let own = container.orderedConfigurations.first?.name, name != own {
                throw SyncError(.configuration, "the container has no store named \(name) (its store is \(own))")
            }
            return container
        }
        guard let name else {
            throw SyncError(
                .configuration,
                "the container has several stores (\(names.joined(separator: ", "))): each syncs through an engine of "
                    + "its own; name one in SyncConfiguration.store")
        }
        guard let part = container.parts.first(where: { $0.orderedConfigurations.first?.name == name }) else {
            throw SyncError(
                .configuration, "the container has no store named \(name) (its stores: \(names.joined(separator: ", ")))")
        }
        return part
    }

    /// Whether `note` (`didSave`) is of a local save that wrote to the store
    /// of `synced`: a save of its context, or of a context of `container`
    /// (the whole container of several stores) that names its models.
    private static func isLocalSave(_ note: Notification, of synced: ModelContainer, in container: ModelContainer)
        -> Bool
    {
        guard let context = note.object as? ModelContext, context.author != SyncReplica.author else { return false }
        if context.container === synced { return true }
        guard context.container === container else { return false }
        let store = synced.store.identifier
        return [ModelContext.NotificationKey.insertedIdentifiers, .updatedIdentifiers, .deletedIdentifiers].contains {
            key in
            (note.userInfo?[key.rawValue] as? [PersistentIdentifier] ?? []).contains { $0.storeIdentifier == store }
        }
    }

    /// The container of the store this engine syncs: ``container``, or one
    /// of its stores (``SyncConfiguration/store``).
    private let synced: ModelContainer

    /// Counts local saves into the status's pending changes. Written once,
    /// by the initializer, and read by `deinit` only.
    private nonisolated(unsafe) var saveObserver: (any NSObjectProtocol)?

    /// What sync is doing, the local saves not pushed yet, and the last
    /// error.
    public var status: SyncStatus {
        registrar.access(self, keyPath: \.status)
        return current.withLock { $0 }
    }

    private func update(_ change: (inout SyncStatus) -> Void) {
        registrar.withMutation(of: self, keyPath: \.status) {
            let status = current.withLock { status in
                change(&status)
                return status
            }
            watchers.withLock { watchers in
                for watcher in watchers.all.values { watcher.yield(status) }
            }
        }
    }

    /// The streams of ``statusUpdates``, by number, and the next number.
    private let watchers = Mutex<(next: Int, all: [Int: AsyncStream<SyncStatus>.Continuation])>((0, [:]))

    /// The status now, then every change of it (each activity, each batch
    /// pulled, each push), for a program without SwiftUI: `for await status
    /// in engine.statusUpdates { … }`. Each use is a stream of its own,
    /// which keeps the newest 64 statuses a slow reader has not taken; it
    /// ends when the engine is released.
    public var statusUpdates: AsyncStream<SyncStatus> {
        let (stream, continuation) = AsyncStream<SyncStatus>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let number = watchers.withLock { watchers in
            watchers.next += 1
            watchers.all[watchers.next] = continuation
            continuation.yield(current.withLock { $0 })
            return watchers.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.watchers.withLock { $0.all.removeValue(forKey: number) }
        }
        return stream
    }

    deinit {
        if let saveObserver { NotificationCenter.default.removeObserver(saveObserver) }
        for watcher in watchers.withLock({ Array($0.all.values) }) { watcher.finish() }
    }

    /// Starts syncing in the background: a round now, then one after each
    /// local save, each notification from the server, and every
    /// ``SyncConfiguration/pollInterval``. Calling it again does nothing.
    public func start() {
        if let error = leftError { return update { $0.lastError = error } }
        let (stream, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let started: Bool = running.withLock { state in
            guard state == nil else { return false }
            let poll = configuration.pollInterval
            let loop = Task { [weak self] in
                var iterator = stream.makeAsyncIterator()
                var backoff = Backoff(limit: poll)
                while !Task.isCancelled {
                    guard let self else { return }
                    let error = await self.round()
                    if error?.code == .unreachable {
                        // The server is gone or the connection broke: try
                        // again soon (1 s, doubling up to the poll interval)
                        // whether or not anything wakes the loop, so that a
                        // device converges within seconds of its return.
                        try? await Task.sleep(for: backoff.next())
                        continue
                    }
                    backoff.reset()
                    // After another error, wait before trying again, however
                    // many saves wake the loop.
                    if error != nil { try? await Task.sleep(for: .seconds(1)) }
                    guard await iterator.next() != nil else { return }
                }
            }
            let zone = configuration.zone
            let listener = Task { [weak self] in
                var backoff = Backoff(limit: poll)
                while !Task.isCancelled {
                    guard let self else { return }
                    let began = ContinuousClock.now
                    do {
                        try await self.worker.server.listen(
                            zone: self.configuration.zone,
                            listening: { [weak self] in
                                self?.update { $0.notifications = .live }
                                self?.log(.debug, "listening for the server's notifications", zone: zone)
                            },
                            wake: { wake.yield() })
                    } catch {
                        // Notifications are a shortcut; polling goes on.
                    }
                    self.update { $0.notifications = .polling }
                    // Listening held a while: a new failure starts from 1 s.
                    if ContinuousClock.now - began > poll { backoff.reset() }
                    // Listening again (which wakes a round) soon after a
                    // failure, then less and less often, at most every poll.
                    try? await Task.sleep(for: backoff.next())
                    wake.yield()
                }
            }
            let (container, synced) = (container, synced)
            let saves = NotificationCenter.default.addObserver(forName: ModelContext.didSave, object: nil, queue: nil) {
                note in
                guard Self.isLocalSave(note, of: synced, in: container) else { return }
                wake.yield()
            }
            state = RunningState(loop: loop, listener: listener, saves: saves, wake: wake)
            return true
        }
        if started { wake.yield() }
    }

    /// Stops syncing; a round under way is finished first. Local saves go on
    /// and wait in the outbox.
    public func stop() async {
        if let state = running.withLock({ state -> RunningState? in
            defer { state = nil }
            return state
        }) {
            if let saves = state.saves { NotificationCenter.default.removeObserver(saves) }
            state.wake.finish()
            state.listener.cancel()
            await state.loop.value
            await state.listener.value
        }
        await worker.close()
        update {
            $0.activity = .stopped
            $0.notifications = .polling
        }
    }

    /// Pulls what other devices pushed, pushes every local save not pushed
    /// yet, and returns when the server holds them.
    ///
    /// - Throws: ``SyncError``; the status's ``SyncStatus/lastError`` holds
    ///   it too.
    public func syncNow() async throws(SyncError) {
        if let error = await round() { throw error }
    }

    /// Returns once every local save made before the call is on the server
    /// and the store holds the zone's changes up to the server's head (as a
    /// round after the call saw it). While the server cannot be reached it
    /// waits, trying again after 1 s, then 2, 4 and so on up to
    /// ``SyncConfiguration/pollInterval``; a started engine's own rounds go
    /// on meanwhile. For programs without SwiftUI: a tool that saves, then
    /// waits before it exits.
    ///
    /// - Throws: ``SyncError`` for any error but
    ///   ``SyncError/Code/unreachable`` (a refusal, a damaged server, a
    ///   store error); ``SyncError/Code/stopped`` when the task is
    ///   cancelled.
    public func waitUntilSynced() async throws(SyncError) {
        var backoff = Backoff(limit: configuration.pollInterval)
        while true {
            if Task.isCancelled { throw SyncError(.stopped, "waiting for sync was cancelled") }
            guard let error = await round() else { return }
            guard error.code == .unreachable else { throw error }
            try? await Task.sleep(for: backoff.next())
        }
    }

    /// Leaves the zone: the engine stops, and the store forgets its place
    /// in the zone (its device, position, identifiers and saves not pushed
    /// yet). The zone on the server is left as it is, for the other
    /// devices.
    ///
    /// With `keepingData`, the store's models stay, as local models: a
    /// ``SyncEngine`` made later for a zone (this one or another) uploads
    /// them as a store joining with models does. Without it they are
    /// deleted, as by `deleteAllData()`, and the zone keeps them.
    ///
    /// This engine does not sync again: its rounds throw
    /// ``SyncError/Code/stopped``. Make a new engine to join a zone.
    ///
    /// - Throws: ``SyncError/Code/store`` when the store cannot be written:
    ///   it is then unchanged and still in the zone, or (without
    ///   `keepingData`) out of the zone with its models still there.
    public func leaveZone(keepingData: Bool) async throws(SyncError) {
        await stop()
        left.withLock { $0 = true }
        do {
            try worker.leaveZone()
        } catch {
            left.withLock { $0 = false }
            throw SyncError(.store, "leaving zone \(configuration.zone): \(error)")
        }
        update { $0 = SyncStatus() }
        // Out of the zone now, whatever follows: a round would join it
        // again and upload the models as new ones.
        if !keepingData {
            do {
                try worker.eraseStore()
            } catch {
                throw SyncError(.store, "left zone \(configuration.zone), but deleting the store's models failed: \(error)")
            }
        }
        let models = keepingData ? "keeping the store's models" : "deleting the store's models"
        log(.info, "left the zone, \(models)", zone: configuration.zone)
    }

    /// The error of a round after ``leaveZone(keepingData:)``.
    private var leftError: SyncError? {
        guard left.withLock({ $0 }) else { return nil }
        return SyncError(.stopped, "the store left zone \(configuration.zone); make a new SyncEngine to join a zone")
    }

    /// Replaces the zone's changes through this store's position on the
    /// server by a snapshot of the zone's models (the server's history
    /// stops growing without bound). A round runs first. Devices behind the
    /// trimmed changes, and new devices, download the snapshot on their next
    /// round, then pull the changes after it.
    ///
    /// - Returns: the last change the snapshot stands for.
    /// - Throws: ``SyncError``; code ``SyncError/Code/configuration`` when
    ///   this store's schema lacks parts of the zone that a newer schema
    ///   writes (it does not hold the zone's whole state); code
    ///   ``SyncError/Code/store`` when rounds could not align the store with
    ///   its zone copy (see the Sync article), so its models may not be the
    ///   zone's.
    @discardableResult
    public func trimServerHistory() async throws(SyncError) -> Int64 {
        if let error = leftError { throw error }
        return try await worker.trim { [weak self] activity, outcome in
            self?.update {
                if let activity { $0.activity = activity }
                $0.take(outcome.state, head: outcome.head)
            }
        }
    }

    /// One round; returns its error (also in the status).
    @discardableResult
    private func round() async -> SyncError? {
        let formerRejoin = status.rejoined
        if let error = leftError {
            update { $0.lastError = error }
            return error
        }
        do {
            let outcome = try await worker.round { [weak self] activity, outcome in
                self?.update {
                    if let activity { $0.activity = activity }
                    $0.take(outcome.state, head: outcome.head)
                }
            }
            update {
                $0.activity = running.withLock { $0 == nil } ? .stopped : .idle
                $0.lastError = nil
                $0.lastSync = Date()
                $0.take(outcome.state, head: outcome.head)
            }
            let zone = configuration.zone
            log(
                .debug,
                "round: at change \(outcome.state.position) of \(outcome.head), \(outcome.state.pendingSaves) saves "
                    + "pending; applied \(outcome.applied.inserted.count) inserts, \(outcome.applied.updated.count) "
                    + "updates, \(outcome.applied.deleted.count) deletes", zone: zone)
            for merge in outcome.applied.merged {
                log(.info, "merged \(merge.merged) into \(merge.into) (a unique constraint)", zone: zone)
            }
            if let rejoined = outcome.state.rejoined, rejoined != formerRejoin {
                log(.warning, "\(rejoined)", zone: zone)
            }
            for lost in outcome.applied.lost {
                log(.info, "a change saved here was lost: \(lost.model) \(lost.reason)", zone: zone)
            }
            if let rule = configuration.automaticTrimming, outcome.state.position - outcome.trimmed > Int64(rule.changes) {
                // Best effort: a trim that fails (a read-only share, a
                // schema that lacks parts of the zone) is tried again after
                // the next round, and the round stands.
                do {
                    let through = try await worker.trim { _, _ in }
                    log(.info, "trimmed the zone's history through change \(through)", zone: zone)
                } catch {
                    log(.warning, "automatic trimming failed: \(error)", zone: zone)
                }
            }
            if !outcome.applied.isEmpty {
                NotificationCenter.default.post(
                    name: Self.didApplyRemoteChanges, object: container,
                    userInfo: outcome.applied.userInfo)
            }
            return nil
        } catch {
            let state = try? worker.localState()
            switch error.code {
            case .unreachable: log(.warning, "offline: \(error.message)", zone: configuration.zone)
            default: log(.error, "round failed: \(error)", zone: configuration.zone)
            }
            update {
                switch error.code {
                case .unreachable: $0.activity = .offline
                case .authentication, .forbidden, .serverLayout: $0.activity = .refused
                default: $0.activity = running.withLock { $0 == nil } ? .stopped : .idle
                }
                $0.lastError = error
                if let state { $0.take(state, head: $0.serverHead) }
            }
            return error
        }
    }
}

#if !Sync
    /// The server of a build without the `Sync` trait: every call fails.
    struct UnavailableServer: ZoneServer {
        private var error: SyncError {
            SyncError(.configuration, "StrataSync was built without its Sync trait: no PostgreSQL transport")
        }
        func prepare() async throws(SyncError) { throw error }
        func push(zone: String, device: [UInt8], token: Int64, expected: Int64, schema: String, payload: [UInt8])
            async throws(SyncError) -> PushOutcome
        { throw error }
        func register(zone: String, hash: String, description: String, accept: @escaping @Sendable ([String]) throws -> Void)
            async throws(SyncError) -> [String]
        { throw error }
        func head(zone: String) async throws(SyncError) -> ZoneHead { throw error }
        func snapshotPart(zone: String, through: Int64, part: Int) async throws(SyncError) -> [UInt8]? { throw error }
        func trim(zone: String, through: Int64, parts: [[UInt8]]) async throws(SyncError) -> Bool { throw error }
        func pull(zone: String, after: Int64, limit: Int) async throws(SyncError) -> [ServerChange] { throw error }
        func setAside(zone: String, seq: Int64, code: String, reason: String) async throws(SyncError) -> Bool { throw error }
        func missingParts(zone: String, values: [(digest: [UInt8], parts: Int)]) async throws(SyncError)
            -> [(digest: [UInt8], part: Int)]
        { throw error }
        func putParts(zone: String, parts: [(digest: [UInt8], part: Int, bytes: [UInt8])]) async throws(SyncError) {
            throw error
        }
        func parts(zone: String, _ wanted: [(digest: [UInt8], part: Int)]) async throws(SyncError)
            -> [(digest: [UInt8], part: Int, bytes: [UInt8])]
        { throw error }
        func listen(zone: String, listening: @escaping @Sendable () -> Void, wake: @escaping @Sendable () -> Void)
            async throws(SyncError)
        { throw error }
        func close() async {}
    }
#endif

/// Delays between attempts after a failure: 1 s, doubling up to `limit`.
struct Backoff {
    let limit: Duration
    private var delay = Duration.seconds(1)

    init(limit: Duration) { self.limit = limit }

    /// The next delay.
    mutating func next() -> Duration {
        let now = min(delay, limit)
        delay = min(delay * 2, limit)
        return now
    }

    /// After a success: the next failure waits 1 s again.
    mutating func reset() { delay = .seconds(1) }
}

extension SyncStatus {
    /// Takes the store's sync state, and the zone's head as last seen.
    mutating func take(_ state: SyncReplica.State, head: Int64) {
        pendingChanges = state.pendingSaves
        serverPosition = state.position
        serverHead = max(head, state.position)
        setAside = state.setAside
        rejoined = state.rejoined
    }
}

extension SyncReplica.Applied {
    /// What ``SyncEngine/didApplyRemoteChanges`` tells.
    var userInfo: [String: Any] {
        var info: [String: Any] = [
            ModelContext.NotificationKey.insertedIdentifiers.rawValue: inserted,
            ModelContext.NotificationKey.updatedIdentifiers.rawValue: updated,
            ModelContext.NotificationKey.deletedIdentifiers.rawValue: deleted,
        ]
        if !merged.isEmpty { info[SyncEngine.mergedModelsKey] = merged }
        if !lost.isEmpty { info[SyncEngine.lostChangesKey] = lost }
        return info
    }
}

#if Sync
    extension SyncEngine: Service {
        /// Syncs as a service of a swift-service-lifecycle `ServiceGroup`:
        /// starts, and on the group's graceful shutdown (or cancellation)
        /// stops, finishing the round under way first.
        public func run() async throws {
            start()
            // Cancellation ends the wait too; either way, stop gracefully.
            do { try await gracefulShutdown() } catch {}
            await stop()
        }
    }
#endif
