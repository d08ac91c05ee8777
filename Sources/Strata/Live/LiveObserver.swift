import Foundation
import StrataEngine

// Live results, the shared part: what an observed fetch reads, the
// observer that a commit marks changed, and how commits reach observers.
//
// A commit reaches observers through the store's ``MergeHub`` as the
// ``SavedChanges`` it publishes: this process's saves from `finish`,
// other processes' saves from the history (``Store/catchUpWithOtherProcesses()``,
// which a watcher thread runs while observers exist). An observer is
// marked changed when the commit touched something its value reads; a
// mark is a flag, so commits that arrive before the consumer asks for the
// next value coalesce into one re-run.

/// What an observed value reads, by entity ordinal: which fields, and
/// whether inserts and deletes of rows count.
struct LiveDependencies: Sendable {
    struct Reads: Sendable {
        var fields = _FieldSet()
        /// True when inserting or deleting a row of the entity can change
        /// the value.
        var rows = false
    }

    /// By entity ordinal.
    private(set) var byEntity: [Int: Reads] = [:]
    /// When set, only changes to this row of the observed entity count
    /// (a single model's value); rows of other entities count as usual.
    var onlyRow: (entity: Int, row: Int64)?

    /// Depends on every field and row of every entity of `schema`.
    static func everything(_ schema: Schema) -> LiveDependencies {
        var all = LiveDependencies()
        for entity in schema.entities { all.read(entity, fields: _FieldSet(all: entity.properties.count), rows: true) }
        return all
    }

    /// Adds `fields` (and rows, when `rows`) of `entity` and of its
    /// subentities, which number inherited fields as it does.
    mutating func read(
        _ entity: Schema.Entity, fields: _FieldSet = _FieldSet(), rows: Bool = false, subentities: Bool = true
    ) {
        for member in subentities ? entity.family : [Schema.Entity.Unowned(entity: entity)] {
            var reads = byEntity[member.entity.ordinal] ?? Reads()
            reads.fields.formUnion(fields)
            reads.rows = reads.rows || rows
            byEntity[member.entity.ordinal] = reads
        }
    }

    mutating func read(_ entity: Schema.Entity, field: Int, rows: Bool = false) {
        var fields = _FieldSet()
        fields.insert(field)
        read(entity, fields: fields, rows: rows)
    }

    /// What a fetch of `descriptor` over `entity` reads: the rows of the
    /// entity's family, the fields its predicate and sort read, and the
    /// entities the predicate reaches through relationships (every row
    /// of those counts). Every field of every entity when part of the
    /// predicate is left to Foundation (it may read anything) or a sort
    /// key path is not a stored property.
    static func of<T: PersistentModel>(_ descriptor: FetchDescriptor<T>, entity: Schema.Entity, schema: Schema)
        -> LiveDependencies
    {
        var dependencies = LiveDependencies()
        dependencies.read(entity, rows: true)
        for sort in descriptor.sortBy {
            guard let path = sort.keyPath, let property = entity.property(at: path) else { return .everything(schema) }
            dependencies.read(entity, field: property.field)
        }
        guard let predicate = descriptor.predicate else { return dependencies }
        // Translated once per class of the hierarchy: type checks and
        // casts are resolved per class, as the fetch resolves them.
        for member in entity.family {
            let translated: PredicateConversion.Result
            do {
                translated = try PredicateConversion.convert(predicate, schema: schema, entity: member.entity)
            } catch {
                // The fetch throws the same error when it runs.
                return .everything(schema)
            }
            guard translated.isExact else { return .everything(schema) }
            if let expression = translated.expression, !dependencies.collect(expression) { return .everything(schema) }
        }
        return dependencies
    }

    /// Adds what `expression` reads; false when it reads something not
    /// stored (a computed property), whose inputs are unknown.
    private mutating func collect(_ expression: QueryExpr) -> Bool {
        var pending = [expression]
        while let node = pending.popLast() {
            switch node {
            case .constant, .variable:
                break
            case .property(let base, let entity, let property):
                // The fetched model's own fields count as fields; a model
                // reached through a relationship counts whole, since any
                // of its rows may come to be reached.
                if case .variable(0) = base {
                    read(entity, field: property.field)
                } else {
                    read(entity, field: property.field, rows: true)
                }
                pending.append(base)
            case .identifier(let base, let entity):
                if case .variable(0) = base {} else { read(entity, rows: true) }
                pending.append(base)
            case .modelMember:
                return false
            case .collection(let base, _), .member(let base, _), .not(let base), .negate(let base),
                .unwrap(let base), .extreme(let base, _):
                pending.append(base)
            case .and(let a, let b), .or(let a, let b), .compare(_, let a, let b), .contains(let a, let b),
                .substring(let a, let b), .localizedSubstring(let a, let b), .prefix(let a, let b),
                .arithmetic(_, let a, let b), .coalesce(let a, let b), .any(let a, _, let b), .all(let a, _, let b),
                .filter(let a, _, let b), .flatMap(let a, _, let b):
                pending.append(a)
                pending.append(b)
            case .between(let a, let lower, let upper, _):
                pending += [a, lower, upper]
            case .conditional(let a, let b, let c):
                pending += [a, b, c]
            }
        }
        return true
    }

    /// True when `changes` touched what this reads in entity `ordinal`.
    func isAffected(by changes: SavedChanges, ordinal: Int) -> Bool {
        guard let reads = byEntity[ordinal] else { return false }
        if let only = onlyRow, only.entity == ordinal {
            return changes.updates[ordinal].contains { $0.row == only.row && $0.fields.intersects(reads.fields) }
                || changes.deletes[ordinal].contains(only.row)
                || (ordinal < changes.everywhere.count && changes.everywhere[ordinal].intersects(reads.fields))
        }
        if reads.rows, changes.hasRowsAddedOrRemoved(ordinal) { return true }
        if ordinal < changes.everywhere.count, changes.everywhere[ordinal].intersects(reads.fields) { return true }
        return changes.updates[ordinal].contains { $0.fields.intersects(reads.fields) }
    }

    /// The entity ordinals this reads.
    var entities: [Int] { Array(byEntity.keys) }
}

/// One live value's link to the commits: marked changed by the committing
/// thread, waited on by the consumer. Held strongly by its consumer (a
/// sequence's iterator, a ``LiveQuery``) and weakly by the hub, so it
/// leaves the hub when its consumer goes.
final class LiveObserver: Sendable {
    private struct State {
        /// A commit touched the value since the consumer last took it.
        var changed = false
        /// No value follows: the container closed or the consumer was
        /// cancelled.
        var ended = false
        /// The consumer waiting for a change, if any.
        var waiter: CheckedContinuation<Bool, Never>?
    }

    let dependencies: LiveDependencies
    /// The container whose context made the observer: closing it ends
    /// the observer, not those of other containers on the store.
    let container: ObjectIdentifier
    /// Called (on the committing thread) when a change arrives while none
    /// was pending: how a ``LiveQuery`` tells its observers.
    let onChange: (@Sendable () -> Void)?
    private let state = Locked(State())
    private weak let hub: MergeHub?

    init(
        _ dependencies: LiveDependencies, container: ModelContainer, hub: MergeHub,
        onChange: (@Sendable () -> Void)? = nil
    ) {
        self.dependencies = dependencies
        self.container = ObjectIdentifier(container)
        self.hub = hub
        self.onChange = onChange
        hub.register(self)
    }

    deinit { hub?.unregisterObserver() }

    /// A commit touched the value.
    func markChanged() {
        let (waiter, first) = state.withLock { state -> (CheckedContinuation<Bool, Never>?, Bool) in
            guard !state.ended else { return (nil, false) }
            if let waiter = state.waiter {
                state.waiter = nil
                return (waiter, true)
            }
            let first = !state.changed
            state.changed = true
            return (nil, first)
        }
        waiter?.resume(returning: true)
        if first { onChange?() }
    }

    /// No value follows: wakes a waiting consumer with the end.
    func end() {
        let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            state.ended = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: false)
        onChange?()
    }

    var hasEnded: Bool { state.withLock { $0.ended } }

    /// Takes the changed mark: true when a commit touched the value since
    /// the last take.
    func takeChange() -> Bool {
        state.withLock { state in
            defer { state.changed = false }
            return state.changed
        }
    }

    /// Waits until a commit touches the value (true; the mark is taken)
    /// or no value follows (false): the container closed, or the waiting
    /// task was cancelled, which ends the observer.
    func waitForChange() async -> Bool {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let ready = state.withLock { state -> Bool? in
                    if state.ended || Task.isCancelled {
                        state.ended = true
                        return false
                    }
                    if state.changed {
                        state.changed = false
                        return true
                    }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            end()
        }
    }
}

extension SavedChanges {
    /// True when the save inserted or deleted rows of entity `ordinal`.
    func hasRowsAddedOrRemoved(_ ordinal: Int) -> Bool {
        !deletes[ordinal].isEmpty || insertedEntities.contains(ordinal)
            || (ordinal < inserts.count && !inserts[ordinal].isEmpty)
    }

    /// The entity ordinals the save touched in any way.
    var touchedEntities: [Int] {
        updates.indices.filter { ordinal in
            !updates[ordinal].isEmpty || hasRowsAddedOrRemoved(ordinal)
                || (ordinal < everywhere.count && !everywhere[ordinal].isEmpty)
        }
    }
}
