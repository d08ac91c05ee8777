/// A few values keyed by field number, for per-model bookkeeping that
/// usually holds one entry or none (the to-many a save's inverse upkeep
/// edited): the first entry is stored inline, so the common model costs no
/// allocation and no hashing, and later ones in a short array searched in
/// order. The subset of `Dictionary`'s interface the model state uses.
struct FieldMap<Value>: ExpressibleByDictionaryLiteral {
    private var first: (field: Int, value: Value)?
    private var rest: [(field: Int, value: Value)] = []

    init(dictionaryLiteral elements: (Int, Value)...) {
        for (field, value) in elements { self[field] = value }
    }

    var isEmpty: Bool { first == nil && rest.isEmpty }

    subscript(field: Int) -> Value? {
        get {
            if let first, first.field == field { return first.value }
            return rest.first { $0.field == field }?.value
        }
        set {
            if let newValue {
                if first == nil || first?.field == field {
                    first = (field, newValue)
                } else if let index = rest.firstIndex(where: { $0.field == field }) {
                    rest[index].value = newValue
                } else {
                    rest.append((field, newValue))
                }
            } else {
                _ = removeValue(forKey: field)
            }
        }
    }

    /// The value of `field`, changed in place; `defaultValue` first when
    /// there is none.
    subscript(field: Int, default defaultValue: @autoclosure () -> Value) -> Value {
        get { self[field] ?? defaultValue() }
        _modify {
            if first == nil { first = (field, defaultValue()) }
            if first!.field == field {
                yield &first!.value
                return
            }
            let index =
                rest.firstIndex { $0.field == field }
                ?? {
                    rest.append((field, defaultValue()))
                    return rest.count - 1
                }()
            yield &rest[index].value
        }
    }

    /// Removes the value of `field` and returns it, if there was one.
    mutating func removeValue(forKey field: Int) -> Value? {
        if let current = first, current.field == field {
            first = rest.isEmpty ? nil : rest.removeFirst()
            return current.value
        }
        guard let index = rest.firstIndex(where: { $0.field == field }) else { return nil }
        return rest.remove(at: index).value
    }
}
