import Foundation
import Strata

/// The one place a ``SyncEngine``'s rounds run, one at a time: it owns the
/// store's ``SyncReplica`` and talks to the server.
actor Worker {
    let server: any ZoneServer
    let zone: String
    private let log: SyncLog
    nonisolated let replica: ReplicaBox
    private let schema: SyncSchema
    private var prepared = false
    /// The external values this worker found or put in the zone (their
    /// digests), not asked about again.
    var uploaded: Set<[UInt8]> = []

    /// How many server changes one pull asks for.
    static let pullBatch = 256

    /// The replica, used from the actor and, for reading the state, from the
    /// engine; `SyncReplica` reads and writes through the store's own
    /// transactions, which serialize.
    final class ReplicaBox: @unchecked Sendable {
        let replica: SyncReplica
        // Guarded by `lock`: one call into the replica at a time.
        private let lock = NSLock()
        init(_ replica: SyncReplica) { self.replica = replica }
        func with<R>(_ body: (SyncReplica) throws -> R) rethrows -> R { try lock.withLock { try body(replica) } }
    }

    init(container: ModelContainer, zone: String, server: any ZoneServer, log: SyncLog = .silent) throws(SyncError) {
        self.server = server
        self.zone = zone
        self.log = log
        do {
            let replica = try SyncReplica(container: container)
            _ = try replica.join(zone: zone)
            do {
                replica.zoneCopy = try SyncReplica.openZoneCopy(of: container, zone: zone)
            } catch {
                // Sync goes on without it, as before zone copies.
                log(.warning, "the zone copy does not open: \(error)", zone: zone)
            }
            self.replica = ReplicaBox(replica)
        } catch let refusal as SyncReplica.Refusal {
            throw SyncError(.configuration, refusal.description)
        } catch {
            throw SyncError(.store, "\(error)")
        }
        schema = SyncSchema(container.schema)
    }

    nonisolated func localState() throws(SyncError) -> SyncReplica.State {
        do {
            return try replica.with { try $0.state() }
        } catch {
            throw SyncError(.store, "\(error)")
        }
    }

    /// `body` on the replica; its error is a `store` error saying `doing`.
    nonisolated func store<T>(_ body: (SyncReplica) throws -> T, _ doing: String) throws(SyncError) -> T {
        do {
            return try replica.with { try body($0) }
        } catch {
            throw SyncError(.store, "\(doing): \(error)")
        }
    }

    /// Forgets the store's place in the zone.
    nonisolated func leaveZone() throws { try replica.with { try $0.leave() } }

    /// Deletes the store's models (`deleteAllData()`).
    nonisolated func eraseStore() throws { try replica.with { try $0.container.erase() } }

    struct Outcome: Sendable {
        var state: SyncReplica.State
        var applied = SyncReplica.Applied()
        /// The zone's last change as the round last saw it.
        var head: Int64 = 0
        /// The last change the zone's snapshot stands for, as the round
        /// last saw it.
        var trimmed: Int64 = 0
    }

    /// Pulls, pushes every outbox entry (pulling again whenever the zone
    /// moved on), until the outbox is empty and the store holds the zone's
    /// last change.
    func round(report: @Sendable (SyncStatus.Activity?, Outcome) -> Void) async throws(SyncError) -> Outcome {
        // One round at a time: the actor alone would let a second round in
        // at every network wait (a `syncNow()` beside the background loop),
        // and both would apply the same pulled change.
        await enter()
        defer { leave() }
        if !prepared {
            try await server.prepare()
            try await checkSchema()
            prepared = true
        }
        if try localState().zone == nil {
            // `deleteAllData()` emptied the store, its sync state with it:
            // it joins again as a new device, and the zone's models come
            // back (as they do from CloudKit after a store is deleted).
            do {
                _ = try replica.with { try $0.join(zone: zone) }
            } catch {
                throw SyncError(.store, "joining the zone again: \(error)")
            }
        }
        var outcome = Outcome(state: try localState())
        guard let device = outcome.state.device?.bytes else {
            throw SyncError(.store, "the store's sync state names no device")
        }
        while true {
            // `pullAll` reports pulling once the server answers: until then
            // an engine that is offline stays so, however often it retries.
            try await pullAll(into: &outcome, report: report)
            report(.pushing, outcome)
            let outbox: [(token: Int64, payload: [UInt8])]
            do {
                outbox = try replica.with { try $0.prepareOutbox() }
            } catch {
                throw SyncError(.store, "preparing the outbox: \(error)")
            }
            var behind = false
            for entry in outbox {
                try await uploadExternalValues(of: entry.payload)
                let position = try localState().position
                let result = try await server.push(
                    zone: zone, device: device, token: entry.token, expected: position, schema: schema.hash,
                    payload: entry.payload)
                switch result {
                case .appended(let seq):
                    do {
                        try replica.with { try $0.acknowledge(token: entry.token, seq: seq, pushed: entry.payload) }
                    } catch {
                        throw SyncError(.store, "recording a push: \(error)")
                    }
                    outcome.state = try localState()
                    outcome.head = max(outcome.head, seq)
                    report(nil, outcome)
                case .duplicate(let seq) where seq <= position:
                    // A save whose reply was lost, then trimmed into a
                    // snapshot this store restored: it is here already.
                    do {
                        try replica.with { try $0.forgetPushed(token: entry.token) }
                    } catch {
                        throw SyncError(.store, "recording a push: \(error)")
                    }
                case .behind, .duplicate:
                    // The zone moved on (or holds this save already, after
                    // a push whose reply was lost): pull first.
                    behind = true
                }
                if behind { break }
            }
            if !behind {
                try store({ try $0.forgetExternalValues() }, "dropping the external values kept for sync")
                do {
                    try await catchUpCopy()
                } catch {
                    log(.warning, "bringing the zone copy up to date: \(error)", zone: zone)
                }
                do {
                    outcome.applied.add(try replica.with { try $0.alignWithZone() })
                } catch {
                    // The round's work is done; the next round tries again.
                    log(.warning, "aligning with the zone copy: \(error)", zone: zone)
                }
                outcome.state = try localState()
                return outcome
            }
        }
    }

    /// Brings a zone copy out of step (a crash between an apply here and
    /// there, a copy removed) up to this store's position by the zone's own
    /// changes, when this store's models are not the zone's state (see
    /// ``SyncReplica/copyLag()``): the zone's snapshot if the copy is
    /// behind it, then each change after. Stops without error when the
    /// zone cannot give what the copy lacks (trimmed past this store, or
    /// since the head was read): the next round tries again.
    private func catchUpCopy(restarting: Bool = true) async throws(SyncError) {
        guard var lag = try store({ try $0.copyLag() }, "reading the zone copy") else { return }
        let head = try await server.head(zone: zone)
        if lag.copy < head.trimmed {
            // The changes through `trimmed` are gone: the snapshot stands
            // for them.
            guard head.trimmed <= lag.store else { return }
            var parts: [[UInt8]] = []
            while let part = try await server.snapshotPart(zone: zone, through: head.trimmed, part: parts.count) {
                parts.append(part)
            }
            // A trim since the head was read replaces the snapshot: its
            // parts end early, and the next round reads the new one.
            guard !parts.isEmpty, try await server.head(zone: zone).trimmed == head.trimmed else { return }
            try store({ try $0.copyStarts(from: (head.trimmed, parts)) }, "restoring the zone copy")
            lag.copy = head.trimmed
            lag.at = nil
        }
        var verify = lag.at
        while lag.copy < lag.store {
            var changes = try await server.pull(
                zone: zone, after: verify == nil ? lag.copy : lag.copy - 1, limit: Self.pullBatch)
            if let at = verify {
                verify = nil
                guard let first = changes.first, first.seq == lag.copy, first.device == at.device.bytes,
                    first.token == at.token
                else {
                    // Not the zone's change at its position: from no change
                    // (once: a copy that cannot be marked waits for the
                    // next round).
                    guard restarting else { return }
                    replica.with { $0.copyOutOfStep() }
                    return try await catchUpCopy(restarting: false)
                }
                changes.removeFirst()
            }
            guard let first = changes.first, first.seq == lag.copy + 1 else { return }
            for change in changes where change.seq <= lag.store {
                guard change.seq == lag.copy + 1, change.device.count == 16,
                    !change.payload.isEmpty || change.setAside != nil
                else { return }
                let taken = replica.with {
                    $0.copyTakes(
                        seq: change.seq, device: SyncID(bytes: change.device), token: change.token,
                        payload: change.setAside == nil ? change.payload : nil)
                }
                guard taken else { return }
                lag.copy = change.seq
            }
        }
    }

    /// Joins the zone again when it lost changes this store applied (see
    /// `SyncReplica+Rejoin`).
    private func rejoin(head: Int64, _ outcome: inout Outcome) throws(SyncError) {
        try store({ try $0.rejoin(head: head) }, "joining the zone again")
        uploaded.removeAll()
        outcome.state = try localState()
    }

    /// Applies the zone's changes after the position, a batch at a time,
    /// reporting each batch (an initial sync shows its progress as the
    /// position against the head). The position moves with each change, so
    /// an interrupted pull resumes where it stopped.
    ///
    /// A zone whose head is below the position, or whose change at the
    /// position is not the one this store applied there (read with the
    /// first batch, when the head is past the position), lost changes this
    /// store applied: the store joins it again.
    private func pullAll(into outcome: inout Outcome, report: @Sendable (SyncStatus.Activity?, Outcome) -> Void)
        async throws(SyncError)
    {
        var zoneHead = try await server.head(zone: zone)
        outcome.head = zoneHead.head
        outcome.trimmed = zoneHead.trimmed
        var verify: (device: SyncID, token: Int64)?
        let start = try localState().position
        if zoneHead.head < start {
            try rejoin(head: zoneHead.head, &outcome)
        } else if zoneHead.head > start, start > 0 {
            verify = try store({ try $0.changeAtPosition() }, "reading the sync state")
        }
        report(.pulling, outcome)
        while true {
            if try localState().position < zoneHead.trimmed {
                try await restore(through: zoneHead.trimmed, into: &outcome)
                report(.pulling, outcome)
                verify = nil
            }
            // Read once per batch: each apply moves the position by one.
            var position = try localState().position
            var changes = try await server.pull(
                zone: zone, after: verify == nil ? position : position - 1, limit: Self.pullBatch)
            if let applied = verify, let first = changes.first, first.seq == position {
                verify = nil
                changes.removeFirst()
                if first.device != applied.device.bytes || first.token != applied.token {
                    try rejoin(head: zoneHead.head, &outcome)
                    continue
                }
            }
            verify = nil
            guard !changes.isEmpty else { return }
            if changes[0].payload.isEmpty && changes[0].setAside == nil {
                // Trimmed since the head was read: the snapshot stands for it.
                zoneHead = try await server.head(zone: zone)
                guard zoneHead.trimmed > position else {
                    throw SyncError(.damagedServerChange, "zone \(zone): server change \(changes[0].seq) has no payload")
                }
                continue
            }
            for change in changes where !change.payload.isEmpty || change.setAside != nil {
                guard change.seq == position + 1 else {
                    throw SyncError(.damagedServerChange, "the zone's changes jump from \(position) to \(change.seq)")
                }
                guard change.device.count == 16 else {
                    throw SyncError(.damagedServerChange, "server change \(change.seq): a device of \(change.device.count) bytes")
                }
                if let (code, reason) = change.setAside {
                    // Another device found it unreadable: moved past unread.
                    try setAside(change, .init(rawValue: code) ?? .damaged, reason)
                    position = change.seq
                    continue
                }
                if !knownSchemas.contains(change.schema) && !refreshedFor.contains(change.schema) {
                    // A schema that registered after this device's round
                    // began: read the zone's schemas again.
                    refreshedFor.insert(change.schema)
                    try await checkSchema()
                }
                try await downloadExternalValues(of: change.payload, seq: change.seq)
                do {
                    let applied = try replica.with {
                        try $0.apply(
                            seq: change.seq, device: SyncID(bytes: change.device), token: change.token, payload: change.payload)
                    }
                    outcome.applied.add(applied)
                    position = change.seq
                } catch let damaged as SyncReplica.DamagedChange {
                    // Set aside in the zone, so that no device tries it
                    // again; a role that may only read the zone moves past
                    // it alone.
                    do {
                        _ = try await server.setAside(
                            zone: zone, seq: change.seq, code: SyncStatus.SetAsideChange.Reason.damaged.rawValue,
                            reason: damaged.reason)
                    } catch {
                        guard error.code == .forbidden else { throw error }
                    }
                    try setAside(change, .damaged, damaged.reason)
                    position = change.seq
                } catch {
                    throw SyncError(.store, "applying server change \(change.seq): \(error)")
                }
            }
            outcome.state = try localState()
            outcome.head = max(outcome.head, position)
            report(.pulling, outcome)
        }
    }

    /// Moves this store past `change` unapplied, recording why.
    private func setAside(_ change: ServerChange, _ reason: SyncStatus.SetAsideChange.Reason, _ message: String)
        throws(SyncError)
    {
        log(.warning, "server change \(change.seq) set aside, \(reason.rawValue): \(message)", zone: zone)
        do {
            try replica.with {
                try $0.setAside(
                    seq: change.seq, device: SyncID(bytes: change.device), token: change.token, reason: reason,
                    message: message)
            }
        } catch {
            throw SyncError(.store, "setting server change \(change.seq) aside: \(error)")
        }
    }

    /// Catches up on a zone trimmed past this store's position: downloads
    /// the snapshot part by part (the parts downloaded stay, so that an
    /// interrupted download resumes), then applies it as one save.
    private func restore(through: Int64, into outcome: inout Outcome) async throws(SyncError) {
        var part: Int
        do {
            part = try replica.with { try $0.downloadedParts(through: through) }
        } catch {
            throw SyncError(.store, "reading the snapshot's parts: \(error)")
        }
        while let payload = try await server.snapshotPart(zone: zone, through: through, part: part) {
            do {
                try replica.with { try $0.keepPart(through: through, part: part, payload: payload) }
            } catch let damaged as SyncReplica.DamagedChange {
                throw SyncError(.damagedServerChange, "zone \(zone): \(damaged.description)")
            } catch {
                throw SyncError(.store, "keeping a snapshot part: \(error)")
            }
            part += 1
        }
        // Trimmed again since (no parts, or parts that end early once the
        // new snapshot replaced them): the next round reads the new one.
        guard part > 0, try await server.head(zone: zone).trimmed == through else {
            throw SyncError(.server, "zone \(zone): the snapshot at change \(through) was replaced; try again")
        }
        try await downloadExternalValues(ofSnapshot: through)
        do {
            let applied = try replica.with { try $0.restore(through: through) }
            outcome.applied.add(applied)
        } catch let damaged as SyncReplica.DamagedChange {
            throw SyncError(.damagedServerChange, "zone \(zone): \(damaged.description)")
        } catch {
            throw SyncError(.store, "applying the zone's snapshot: \(error)")
        }
        outcome.state = try localState()
    }

    /// Replaces the zone's changes through this store's position by a
    /// snapshot of its models; a round runs first, so that the store holds
    /// the zone's state. Returns the change trimmed through.
    func trim(report: @Sendable (SyncStatus.Activity?, Outcome) -> Void) async throws(SyncError) -> Int64 {
        var unaligned = false
        for _ in 0..<5 {
            _ = try await round(report: report)
            await enter()
            defer { leave() }
            let snapshot: (through: Int64, parts: [[UInt8]])
            do {
                snapshot = try replica.with { try $0.snapshot() }
            } catch SyncReplica.SnapshotRefusal.pending {
                continue  // a save came in since the round: another round
            } catch SyncReplica.SnapshotRefusal.unaligned {
                // The round could not align the store with its zone copy
                // (the log says why): another round.
                unaligned = true
                continue
            } catch let refusal as SyncReplica.SnapshotRefusal {
                throw SyncError(.configuration, "this store cannot trim zone \(zone): \(refusal.description)")
            } catch {
                throw SyncError(.store, "making the snapshot: \(error)")
            }
            guard snapshot.through > 0 else { return 0 }
            if try await server.trim(zone: zone, through: snapshot.through, parts: snapshot.parts) {
                return snapshot.through
            }
            let head = try await server.head(zone: zone)
            if head.trimmed >= snapshot.through { return head.trimmed }
        }
        if unaligned {
            throw SyncError(
                .store,
                "zone \(zone): this store is not aligned with its zone copy, so it does not hold the zone's state "
                    + "to trim by (the log says why); try again")
        }
        throw SyncError(.server, "zone \(zone) kept changing while trimming; try again")
    }

    func close() async { await server.close() }

    /// Whether a round runs; the rounds waiting for it, in order.
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    private func enter() async {
        guard busy else {
            busy = true
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    /// Hands the turn to the next waiting round, if any.
    private func leave() {
        if waiting.isEmpty {
            busy = false
        } else {
            waiting.removeFirst().resume()
        }
    }

    /// Records this store's schema in the zone, after checking it can share
    /// the zone with every schema there; hands the others to the replica.
    private func checkSchema() async throws(SyncError) {
        let schema = schema
        let zone = zone
        let others = try await server.register(zone: zone, hash: schema.hash, description: schema.text) { descriptions in
            for description in descriptions {
                let other: SyncSchema
                do {
                    other = try SyncSchema.parse(description)
                } catch {
                    throw SyncError(.damagedServerChange, "zone \(zone): a recorded schema: \(error)")
                }
                let conflicts = schema.conflicts(with: other)
                if !conflicts.isEmpty {
                    throw SyncError(
                        .incompatibleSchema,
                        "zone \(zone) is synced by a schema this one cannot share it with: "
                            + conflicts.joined(separator: "; "))
                }
            }
        }
        var parsed: [SyncSchema] = []
        for description in others {
            do {
                parsed.append(try SyncSchema.parse(description))
            } catch {
                throw SyncError(.damagedServerChange, "zone \(zone): a recorded schema: \(error)")
            }
        }
        replica.with { $0.zoneSchemas = parsed }
        knownSchemas = Set(parsed.map(\.hash) + [schema.hash])
    }

    /// The digests of the zone's schemas as last read, this one's included.
    private var knownSchemas: Set<String> = []
    /// Digests of pulled changes the zone's schemas were read again for.
    private var refreshedFor: Set<String> = []
}
