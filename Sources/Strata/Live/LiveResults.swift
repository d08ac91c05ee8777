import Foundation

/// An `AsyncSequence` of a value read from the store — a fetch's results,
/// a count, one model — that delivers the current value at once and a new
/// one after every commit that can change it: saves of any context or
/// actor of the process, of other processes on the store's file, and sync
/// pulls.
///
/// Make one with ``ModelContext/liveResults(_:)``,
/// ``ModelContext/liveCount(_:)`` or ``ModelContext/liveModel(for:as:)``:
///
/// ```swift
/// let open = FetchDescriptor<Ticket>(predicate: #Predicate { $0.isOpen }, sortBy: [SortDescriptor(\.opened)])
/// for try await tickets in context.liveResults(open) {
///     try await socket.send(tickets.map(TicketJSON.init))
/// }
/// ```
///
/// Guarantees (the "Live results" article compares them with GRDB's
/// `ValueObservation`):
/// - **No commit missed.** The observer is registered before the first
///   value is read; every commit after that read that can change the
///   value leads to a later value that includes it.
/// - **Coalesced.** Commits mark the sequence changed; the value is read
///   again when the consumer asks for the next one, so a slow consumer
///   gets the latest value, never a backlog.
/// - **Filtered.** A commit that touches neither the observed entity's
///   rows (or its subclasses') nor a property its predicate or sort reads,
///   nor an entity the predicate reaches through a relationship, produces
///   no value. Consecutive values may still be equal (a change that did
///   not alter the result).
/// - **Read where you iterate.** Each value is read by the sequence's
///   context, on the isolation that iterates it, with the context's
///   unsaved changes as a fetch sees them; the models are that context's.
/// - **Ends** (returns nil) when the iterating task is cancelled or the
///   container is closed (``ModelContainer/invalidate()``). A read that throws
///   — ``SwiftDataError/unsupportedPredicate``, a damaged record — ends
///   the sequence with that error; other sequences go on.
///
/// Other processes' saves are found in the store's history by a watcher
/// thread that looks every millisecond while sequences exist; saves made
/// with `recordsHistory` off leave no history and are seen only by reads
/// made after them.
public struct LiveResults<Value>: AsyncSequence {
    /// Each value: the results, count or model read after a commit.
    public typealias Element = Value
    /// What a read can throw.
    public typealias Failure = any Error

    let context: ModelContext
    /// The context whose store the value is read from (a part, for a
    /// container of several stores).
    let storeContext: ModelContext
    let dependencies: LiveDependencies
    let read: (ModelContext) throws -> Value

    /// Starts observing: commits from here on count.
    public func makeAsyncIterator() -> Iterator {
        let observer = LiveObserver(
            dependencies, container: context.container, hub: storeContext.container.mergeHub)
        if context.container.isClosed { observer.end() }
        return Iterator(context: context, read: read, observer: observer)
    }

    /// Reads the value again after each commit that can change it.
    public struct Iterator: AsyncIteratorProtocol {
        let context: ModelContext
        let read: (ModelContext) throws -> Value
        let observer: LiveObserver
        private var delivered = false
        private var finished = false

        init(context: ModelContext, read: @escaping (ModelContext) throws -> Value, observer: LiveObserver) {
            self.context = context
            self.read = read
            self.observer = observer
        }

        /// The current value at first; then waits for a commit that can
        /// change it and reads it again. Nil once the sequence ended.
        public mutating func next() async throws -> Value? {
            try await next(isolation: nil)
        }

        /// ``next()``, run on the caller's isolation (where the context
        /// is used).
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(any Error) -> Value? {
            guard !finished else { return nil }
            if delivered {
                guard await observer.waitForChange() else {
                    finished = true
                    return nil
                }
            } else if observer.hasEnded {
                finished = true
                return nil
            }
            delivered = true
            do {
                return try read(context)
            } catch {
                finished = true
                observer.end()
                throw error
            }
        }
    }
}

extension ModelContext {
    /// The models matching `descriptor`, now and after every commit that
    /// can change them (see ``LiveResults``).
    ///
    /// A new value comes when rows of `T` (or of a subclass) are inserted
    /// or deleted, when a property the predicate or a sort reads changes,
    /// or when a model the predicate reaches through a relationship
    /// changes. A change to a property neither reads does not produce one;
    /// the models of the last value show it (they are this context's, and
    /// the context merges other saves at its next fetch or save).
    public func liveResults<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) -> LiveResults<[T]> {
        live(descriptor) { context in try context.fetch(descriptor) }
    }

    /// The number of models matching `descriptor`, now and after every
    /// commit that can change it (see ``LiveResults``).
    public func liveCount<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) -> LiveResults<Int> {
        live(descriptor) { context in try context.fetchCount(descriptor) }
    }

    /// The model with identifier `id`, now and after every commit that
    /// changes it; nil once it is deleted (or when there is none). Commits
    /// that touch other models of its class produce no value.
    public func liveModel<T: PersistentModel>(for id: PersistentIdentifier, as type: T.Type = T.self)
        -> LiveResults<T?>
    {
        let target = storeContext(for: T.self)
        let schema = target.container.schema
        var dependencies = LiveDependencies.everything(schema)
        if let entity = schema.entity(named: id.entityName) {
            dependencies = LiveDependencies()
            dependencies.read(
                entity, fields: _FieldSet(all: entity.properties.count), rows: true, subentities: false)
            dependencies.onlyRow = (entity.ordinal, id.rowID)
        }
        return LiveResults(context: self, storeContext: target, dependencies: dependencies) { context in
            try context.existingModel(for: id)
        }
    }

    /// The context of the store that holds `T`: this one, or its part for
    /// `T` in a container of several stores (this one when none holds it:
    /// the first read then throws).
    private func storeContext<T: PersistentModel>(for type: T.Type) -> ModelContext {
        guard !parts.isEmpty else { return self }
        return part(for: type) ?? self
    }

    private func live<T: PersistentModel, Value>(
        _ descriptor: FetchDescriptor<T>, read: @escaping (ModelContext) throws -> Value
    ) -> LiveResults<Value> {
        let target = storeContext(for: T.self)
        let schema = target.container.schema
        // A type the container does not know: the first read throws.
        let dependencies =
            schema.entity(for: T.self).map { LiveDependencies.of(descriptor, entity: $0, schema: schema) }
            ?? .everything(schema)
        return LiveResults(context: self, storeContext: target, dependencies: dependencies, read: read)
    }
}
