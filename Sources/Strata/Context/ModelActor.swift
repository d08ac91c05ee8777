/// Runs a ``ModelContext``'s work; a `@ModelActor` actor runs on one.
public protocol ModelExecutor: AnyObject, Sendable {
    /// The context whose work the executor runs.
    var modelContext: ModelContext { get }
}

/// A model executor that is also a serial executor for actors.
public protocol SerialModelExecutor: ModelExecutor, SerialExecutor {}

/// Runs jobs one at a time on a private dispatch queue, so that the
/// actor's context is only ever used from one thread at a time.
public final class DefaultSerialModelExecutor: SerialModelExecutor, @unchecked Sendable {
    /// The context whose work this executor runs.
    public let modelContext: ModelContext
    private let queue = DispatchQueue(label: "strata.model-executor")

    /// An executor that runs the work of `modelContext` on a new private queue.
    public init(modelContext: ModelContext) {
        self.modelContext = modelContext
        // The context's autosaves run here, after the actor's work.
        modelContext.autosaveQueue = queue
        for part in modelContext.parts { part.autosaveQueue = queue }
    }

    /// Schedules `job` on the executor's queue, after the jobs already there.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    /// This executor as the unowned reference the actor runtime keeps.
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }
}

/// An actor with its own context on a container (made by `@ModelActor`).
public protocol ModelActor: Actor {
    /// The container the actor's context reads and writes.
    nonisolated var modelContainer: ModelContainer { get }
    /// The executor that owns the actor's context (`@ModelActor` makes a
    /// `DefaultSerialModelExecutor`).
    nonisolated var modelExecutor: any ModelExecutor { get }
}

extension ModelActor {
    /// The actor's context; use it only on the actor.
    public var modelContext: ModelContext { modelExecutor.modelContext }

    /// The model of type `T` with identifier `id` in the actor's context
    /// (`self[id, as: Item.self]`): the registered one, or one loaded from
    /// the store; nil when the store holds no such model of that type, or
    /// its record cannot be read.
    public subscript<T: PersistentModel>(id: PersistentIdentifier, as as: T.Type) -> T? {
        if let registered: T = modelContext.registeredModel(for: id) { return registered }
        do {
            return try modelContext.existingModel(for: id)
        } catch {
            return nil
        }
    }

    /// The actor's serial executor: its model executor when that is a
    /// ``SerialModelExecutor``, otherwise a ``DefaultSerialModelExecutor``
    /// on the same context, made once per model executor (so the context
    /// is still used from one thread at a time).
    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        if let serial = modelExecutor as? any SerialModelExecutor { return serial.asUnownedSerialExecutor() }
        return SerialFallback.executor(for: modelExecutor).asUnownedSerialExecutor()
    }
}

/// Serial executors standing in for model executors that are not serial.
private enum SerialFallback {
    private struct Entry {
        weak var owner: (any ModelExecutor)?
        let executor: DefaultSerialModelExecutor
    }

    /// By the model executor's identity. Guarded by its mutex; entries of
    /// executors that are gone are dropped as new ones are made.
    private static let entries = Locked<[ObjectIdentifier: Entry]>([:])

    static func executor(for owner: any ModelExecutor) -> DefaultSerialModelExecutor {
        entries.withLock { entries in
            if let known = entries[ObjectIdentifier(owner)], known.owner === owner { return known.executor }
            entries = entries.filter { $0.value.owner != nil }
            let made = DefaultSerialModelExecutor(modelContext: owner.modelContext)
            entries[ObjectIdentifier(owner)] = Entry(owner: owner, executor: made)
            return made
        }
    }
}
