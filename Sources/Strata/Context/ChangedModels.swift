// The saved models a context changed, by identity, in the order they
// were first changed.

/// A context's changed models: a dictionary by object identity that also
/// keeps the order in which the models joined it.
///
/// A save passes over its changed models several times (checks, row
/// order, unique keys, writes, the reset after the commit). A `Dictionary`
/// hands them out in hash order, so with ten thousand changed models each
/// pass missed the cache on nearly every model and its state. Apps change
/// models in the order they fetched them, which is row order and, mostly,
/// the order of their allocation: passes in that order walk memory
/// forwards, and the save finds the rows already sorted.
///
/// A removed model leaves a hole in the order; holes are squeezed out once
/// they outnumber the models.
struct ChangedModels {
    /// The models in the order they joined; nil where one was removed.
    private var order: [(any PersistentModel)?] = []
    /// Each model's position in `order`.
    private var positions: [ObjectIdentifier: Int] = [:]

    var count: Int { positions.count }
    var isEmpty: Bool { positions.isEmpty }
    var capacity: Int { positions.capacity }

    /// The model of identity `id`; setting one not held appends it,
    /// setting nil removes it.
    subscript(id: ObjectIdentifier) -> (any PersistentModel)? {
        get { positions[id].flatMap { order[$0] } }
        set {
            guard let model = newValue else {
                removeValue(forKey: id)
                return
            }
            if let at = positions[id] {
                order[at] = model
            } else {
                positions[id] = order.count
                order.append(model)
            }
        }
    }

    /// Removes the model of identity `id`; returns it, or nil when it was
    /// not held.
    @discardableResult mutating func removeValue(forKey id: ObjectIdentifier) -> (any PersistentModel)? {
        guard let at = positions.removeValue(forKey: id) else { return nil }
        let model = order[at]
        order[at] = nil
        if order.count > 32, order.count > 2 * positions.count { squeeze() }
        return model
    }

    mutating func removeAll(keepingCapacity: Bool = false) {
        order.removeAll(keepingCapacity: keepingCapacity)
        positions.removeAll(keepingCapacity: keepingCapacity)
    }

    /// Drops the holes, keeping the order.
    private mutating func squeeze() {
        var kept: [(any PersistentModel)?] = []
        kept.reserveCapacity(positions.count)
        for case let model? in order {
            positions[ObjectIdentifier(model)] = kept.count
            kept.append(model)
        }
        order = kept
    }

    /// The models, in the order they joined.
    var values: Values { Values(order: order, count: positions.count) }

    /// The models of a ``ChangedModels``, in the order they joined.
    struct Values: Sequence {
        fileprivate let order: [(any PersistentModel)?]
        let count: Int

        var underestimatedCount: Int { count }

        func makeIterator() -> Iterator { Iterator(order: order) }

        struct Iterator: IteratorProtocol {
            fileprivate let order: [(any PersistentModel)?]
            fileprivate var position = 0

            mutating func next() -> (any PersistentModel)? {
                while position < order.count {
                    defer { position += 1 }
                    if let model = order[position] { return model }
                }
                return nil
            }
        }
    }
}
