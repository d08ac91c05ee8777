import Foundation

// `@Attribute(.transformable(by:))`: the property's value is stored as the
// `Data` its `ValueTransformer` makes, and read back through the
// transformer's reverse transformation. The value's type needs no
// Codable conformance. A transformer that cannot be found, returns nil
// for a value, or returns something other than `Data` fails the save (the
// store unchanged) or the fetch with `modelValidationFailure`, naming the
// property and the transformer.

/// Where `.transformable(by:)` finds its transformer: one registered under
/// its name, else (for the type form) an instance of the type, made once.
enum TransformerRegistry {
    /// The types named by `.transformable(by: SomeTransformer.self)`.
    private static let types = Locked<[String: ValueTransformer.Type]>([:])
    /// The instances made of `types`, by name.
    private static let made = Locked<[String: ValueTransformer]>([:])

    static func register(_ type: ValueTransformer.Type, as name: String) {
        types.withLock { $0[name] = type }
    }

    /// The transformer called `name`, or nil when there is none.
    static func transformer(named name: String) -> ValueTransformer? {
        #if canImport(Darwin)
            if let registered = ValueTransformer(forName: NSValueTransformerName(name)) { return registered }
        #else
            if let registered = ValueTransformer.registered(forName: name) { return registered }
        #endif
        guard let type = types.withLock({ $0[name] }) else { return nil }
        return made.withLock { made in
            if let existing = made[name] { return existing }
            let instance = type.init()
            made[name] = instance
            return instance
        }
    }

    /// The transformer `option` names; throws when it names none.
    static func transformer(for option: Schema.Attribute.Option) throws -> ValueTransformer {
        guard case .transformable(let name) = option else {
            throw SwiftDataError(.modelValidationFailure, "\(option) is not .transformable(by:)")
        }
        guard let transformer = transformer(named: name) else {
            throw SwiftDataError(
                .modelValidationFailure,
                "no value transformer is registered under the name \"\(name)\"; register one with "
                    + "ValueTransformer.setValueTransformer(_:forName:) or write .transformable(by: TheType.self)")
        }
        return transformer
    }

    /// What a transformer returned as bytes, or nil when it is not `Data`.
    static func bytes(_ value: Any?) -> Data? {
        if let data = value as? Data { return data }
        if let data = value as? NSData { return Data(referencing: data) }
        return nil
    }
}

extension _RecordWriter {
    /// Writes `value` as the `Data` its transformer makes. Called by code
    /// the `@Model` macro generates for `.transformable(by:)`; not meant to
    /// be called directly.
    public mutating func encode<T>(
        _ value: T, field: Int, transformedBy option: Schema.Attribute.Option, state: _ModelState
    ) {
        if skips(field) { return }
        do {
            let transformer = try TransformerRegistry.transformer(for: option)
            let output = transformer.transformedValue(value)
            guard let data = TransformerRegistry.bytes(output) else {
                let what = output.map { "a \(type(of: $0))" } ?? "nil"
                throw SwiftDataError(
                    .modelValidationFailure,
                    "\(type(of: transformer)) returned \(what) for a \(T.self), where a transformable "
                        + "attribute stores Data")
            }
            tag(field, RecordFormat.lengthDelimited)
            appendLengthDelimited(data)
        } catch {
            if failures[field] == nil { failures[field] = error as? SwiftDataError }
            null(field)
        }
    }

    /// Writes an optional transformable value: nil as a nil field (the
    /// transformer never sees it), anything else through the transformer.
    public mutating func encode<T>(
        _ value: T?, field: Int, transformedBy option: Schema.Attribute.Option, state: _ModelState
    ) {
        if skips(field) { return }
        if let value { encode(value, field: field, transformedBy: option, state: state) } else { null(field) }
    }
}

extension _RecordReader {
    /// Reads a transformable value: the stored `Data` through the
    /// transformer's reverse transformation. Called by code the `@Model`
    /// macro generates; not meant to be called directly.
    public mutating func decode<T>(
        _ type: T.Type, field: Int, transformedBy option: Schema.Attribute.Option, state: _ModelState
    ) throws -> T {
        guard let value = try transformed(T.self, field: field, by: option) else { throw missing(field) }
        return value
    }

    /// Reads an optional transformable value: nil when the field is missing
    /// or nil.
    public mutating func decode<T>(
        _ type: T?.Type, field: Int, transformedBy option: Schema.Attribute.Option, state: _ModelState
    ) throws -> T? {
        if skipping != 0, leavesOut(field, state) { return nil }
        return try transformed(T.self, field: field, by: option)
    }

    /// The value of `field` through the transformer `option` names: nil
    /// when the field is missing or nil.
    private mutating func transformed<T>(_ type: T.Type, field: Int, by option: Schema.Attribute.Option) throws -> T? {
        guard let slot = try findInOrder(field), slot.wire != RecordFormat.null else { return nil }
        let data = Data(try payloadBytes(slot, field: field))
        let transformer = try TransformerRegistry.transformer(for: option)
        let output = transformer.reverseTransformedValue(data)
        guard let value = output as? T else {
            let what = output.map { "a \(Swift.type(of: $0))" } ?? "nil"
            let name = entity.properties.indices.contains(field) ? entity.properties[field].name : "field \(field)"
            throw SwiftDataError(
                .modelValidationFailure,
                "\(entityName) row \(row): \(Swift.type(of: transformer)) turned the stored \(data.count) bytes of "
                    + "\(name) into \(what), not a \(T.self)")
        }
        return value
    }
}
