import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxBuilder
import SwiftSyntaxMacros

/// `@Model`: makes a class a persistent, observable model.
///
/// The expansion, for a class `Trip` with a property `var name: String`:
/// - each persisted property gets `@_PersistedProperty(n)` (n = its field
///   number, its position among persisted properties), which turns it into
///   an observed, change-tracked accessor over a private stored peer `_name`;
/// - members: the model's state object (which holds its observation
///   registrar), the `schemaMetadata` table, `#Unique`/`#Index` groups, and
///   the record hooks `init(_strataReader:)`, `_strataLoad(from:fields:)`
///   and `_strataWrite(to:)` that read and write the peers directly, without
///   reflection or dictionaries;
/// - an extension conforming the class to `PersistentModel` (and so
///   `Observable`).
public struct ModelMacro: MemberMacro, MemberAttributeMacro, ExtensionMacro {
    /// Adds the model's members: its state, its entity name, `schemaMetadata`,
    /// its `#Unique` and `#Index` groups, and the record, key and relationship
    /// hooks. Checks the class's members first and reports every problem at
    /// once; throws when attached to anything but a class.
    public static func expansion(
        of node: AttributeSyntax,
        providingMembersOf declaration: some DeclGroupSyntax,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        guard let classDecl = declaration.as(ClassDeclSyntax.self) else {
            throw DiagnosticsError(node, .modelNotAClass)
        }
        let typeName = classDecl.name.trimmedDescription
        try validate(classDecl.memberBlock.members, in: context)
        let properties = StoredProperty.persisted(in: classDecl.memberBlock.members)
        // A class that does not need the `PersistentModel` conformance the
        // macro offers inherits it: its superclass is a model, and the
        // members below override the superclass's.
        let superclass = modelSuperclass(of: classDecl, conformingTo: protocols)
        if let superclass {
            try refuseRedeclaredProperties(of: classDecl, typeName: typeName, superclass: superclass)
        }
        let parts = memberParts(properties, superclass: superclass)
        return try members(of: classDecl, typeName: typeName, properties: properties, superclass: superclass, parts: parts)
    }

    /// A subclass that redeclares a stored property of its superclass
    /// (`override var`) is refused: the field would be stored twice.
    private static func refuseRedeclaredProperties(of classDecl: ClassDeclSyntax, typeName: String, superclass: String)
        throws
    {
        let redeclared = classDecl.memberBlock.members.compactMap { item -> Diagnostic? in
            guard let variable = item.decl.as(VariableDeclSyntax.self), !variable.isStatic, !variable.isComputed,
                variable.modifiers.contains(where: { $0.name.tokenKind == .keyword(.override) }),
                let name = variable.bindings.first?.pattern.trimmedDescription
            else { return nil }
            return Diagnostic(
                node: Syntax(variable),
                message: RedeclaredStoredProperty(property: name, subclass: typeName, superclass: superclass))
        }
        if !redeclared.isEmpty { throw DiagnosticsError(diagnostics: redeclared) }
    }

    /// The generated code for each persisted property, by member.
    private struct MemberParts {
        var metadata: [String] = []
        var reads: [String] = []
        var loads: [String] = []
        var assignments: [String] = []
        var writes: [String] = []
        var keyCases: [String] = []
        var relationshipCases: [String] = []
        var editCases: [String] = []
    }

    private static func memberParts(_ properties: [StoredProperty], superclass: String?) -> MemberParts {
        var parts = MemberParts()
        for (index, property) in properties.enumerated() {
            let name = property.name
            // A model's own fields follow its superclass's: a literal in a
            // class that has none, an offset from the layout otherwise.
            let field = superclass == nil ? "\(index)" : "\(layout).first + \(index)"
            let storage = "self.\(property.storageName)"
            let defaultValue =
                property.initializer.map { initial in property.expressionType.map { "(\(initial)) as \($0)" } ?? "(\(initial))" }
                ?? "nil"
            var options = "nil"
            if let relationship = property.relationship {
                options = "Strata.Schema.Relationship(\(relationship.arguments?.trimmedDescription ?? ""))"
            } else if let attribute = property.attribute {
                options = "Strata.Schema.Attribute(\(attribute.arguments?.trimmedDescription ?? ""))"
            }
            parts.metadata.append(
                "Strata.Schema.PropertyMetadata(name: \"\(name)\", keypath: \\Root.\(name), "
                    + "defaultValue: \(defaultValue), metadata: \(options))"
            )
            // A transformable value goes through its transformer, whatever
            // its type; any other through the overload its type selects.
            let transformed = property.transformerOption.map { ", transformedBy: \($0)" } ?? ""
            let decode =
                "reader.decode(\(property.metatypeExpression), field: \(field)\(transformed), state: _strataState)"
            // A subclass's initializer reads its fields before
            // `super.init`, when the state cannot be reached yet: they
            // record their faults in a staged state the model takes after.
            let initialDecode =
                superclass == nil
                ? decode
                : "reader.decode(\(property.metatypeExpression), field: \(field)\(transformed), state: __staged)"
            // An ephemeral attribute is tracked and observed but never
            // stored: a loaded model starts with its default value. A `let`
            // is read once, when the model is made, and never changes.
            if !property.isEphemeral {
                parts.reads.append("\(storage) = try \(initialDecode)")
                if !property.isLet {
                    parts.loads.append("let __\(name) = try fields?.contains(\(field)) == false ? \(storage) : \(decode)")
                    parts.assignments.append(
                        "if fields?.contains(\(field)) != false { _strataState.withMutation(of: self, keyPath: \\.\(name)) "
                            + "{ \(storage) = __\(name) } }"
                    )
                }
                parts.writes.append("writer.encode(\(storage), field: \(field)\(transformed), state: _strataState)")
            }
            parts.keyCases.append("case \(field): return Strata._keyElement(\(storage))")
            // Overloads chosen by the property's type set relationships
            // and leave attributes alone.
            if !property.isLet {
                parts.relationshipCases.append(
                    "case \(field):\nlet __value = Strata._relationshipValue(value, like: \(storage))\n"
                        + PersistedPropertyMacro.setterBody(name: name, field: field, newValue: "__value"))
                parts.editCases.append(
                    "case \(field):\nreturn _strataState.withMutation(of: self, keyPath: \\.\(name)) "
                        + "{ _strataState.edit(&\(storage), field: \(field), edit) }")
            }
        }
        return parts
    }

    /// The members the macro adds, made of `parts`.
    private static func members(
        of classDecl: ClassDeclSyntax, typeName: String, properties: [StoredProperty], superclass: String?,
        parts: MemberParts
    ) throws -> [DeclSyntax] {
        let override = superclass == nil ? "" : "override "
        let unique = try constraintGroups(named: "Unique", in: classDecl.memberBlock.members)
        let indexes = try constraintGroups(named: "Index", in: classDecl.memberBlock.members)
        let access = classDecl.modifiers.contains {
            $0.name.tokenKind == .keyword(.public) || $0.name.tokenKind == .keyword(.open)
        }
        let pub = access ? "public " : ""
        let inherited = superclass.map { "\($0)._strataProperties(of: Root.self) + " } ?? ""
        let superRead =
            superclass == nil ? "" : "try super.init(_strataReader: &reader)\n_strataState._absorb(__staged)"
        let superLoad = superclass == nil ? "" : "try super._strataLoad(from: &reader, fields: fields)"
        let superWrite = superclass == nil ? "" : "super._strataWrite(to: &writer)"
        let relationshipDefault = superclass == nil ? "break" : "super._strataSetRelationship(field: field, to: value)"
        let editDefault = superclass == nil ? "return false" : "return super._strataEditToMany(field: field, edit)"
        let keyDefault = superclass == nil ? "return nil" : "return super._strataKeyElement(field: field)"
        let first = superclass.map { "\($0).\(layout).end" } ?? "0"

        var members: [DeclSyntax] = []
        if superclass == nil {
            members.append("@Transient \(raw: pub)nonisolated let _strataState = Strata._ModelState()")
        }
        members += [
            """
            /// Where the class's persisted fields lie among its entity's.
            \(raw: pub)nonisolated enum \(raw: layout) {
                \(raw: pub)nonisolated static var first: Int { \(raw: first) }
                \(raw: pub)nonisolated static var end: Int { first + \(raw: properties.count) }
            }
            """,
            "\(raw: pub)nonisolated \(raw: override)class var _strataEntityName: String { \(literal: typeName) }",
            """
            \(raw: pub)nonisolated static func _strataProperties<Root: \(raw: typeName)>(of root: Root.Type) -> [Strata.Schema.PropertyMetadata] {
                \(raw: inherited)[
                    \(raw: parts.metadata.joined(separator: ",\n"))
                ]
            }
            """,
            """
            \(raw: pub)nonisolated \(raw: override)class var schemaMetadata: [Strata.Schema.PropertyMetadata] {
                _strataProperties(of: \(raw: typeName).self)
            }
            """,
            """
            \(raw: pub)nonisolated \(raw: override)class var _strataUniqueness: [[AnyKeyPath]] {
                let groups: [[PartialKeyPath<\(raw: typeName)>]] = [\(raw: unique.joined(separator: ", "))]
                return groups
            }
            """,
            """
            \(raw: pub)nonisolated \(raw: override)class var _strataIndexes: [[AnyKeyPath]] {
                let groups: [[PartialKeyPath<\(raw: typeName)>]] = [\(raw: indexes.joined(separator: ", "))]
                return groups
            }
            """,
            """
            \(raw: pub)nonisolated required init(_strataReader reader: inout Strata._RecordReader) throws {
                \(raw: lines((superclass == nil ? [] : ["let __staged = Strata._ModelState()"]) + parts.reads + [superRead]))
            }
            """,
            """
            \(raw: pub)nonisolated \(raw: override)func _strataLoad(from reader: inout Strata._RecordReader, fields: Strata._FieldSet?) throws {
                \(raw: lines(parts.loads + parts.assignments + [superLoad]))
            }
            """,
            """
            \(raw: pub)nonisolated \(raw: override)func _strataWrite(to writer: inout Strata._RecordWriter) {
                \(raw: lines([superWrite] + parts.writes))
            }
            """,
            """
            \(raw: pub)nonisolated \(raw: override)func _strataSetRelationship(field: Int, to value: Any?) {
                switch field {
                \(raw: (parts.relationshipCases + ["default: \(relationshipDefault)"]).joined(separator: "\n"))
                }
            }
            """,
            """
            \(raw: pub)nonisolated \(raw: override)func _strataEditToMany(field: Int, _ edit: Strata._ToManyEdit) -> Bool {
                switch field {
                \(raw: (parts.editCases + ["default: \(editDefault)"]).joined(separator: "\n"))
                }
            }
            """,
            """
            \(raw: pub)nonisolated \(raw: override)func _strataKeyElement(field: Int) -> Strata.KeyEncoding.Element? {
                switch field {
                \(raw: (parts.keyCases + ["default: \(keyDefault)"]).joined(separator: "\n"))
                }
            }
            """,
        ]
        return members
    }

    /// `parts` without the empty ones, one per line.
    private static func lines(_ parts: [String]) -> String {
        parts.filter { !$0.isEmpty }.joined(separator: "\n")
    }

    /// The name of the nested type that says where a model class's own
    /// fields lie (``expansion(of:providingMembersOf:conformingTo:in:)``).
    /// Each class of a hierarchy declares its own, which hides its
    /// superclass's inside its body.
    static let layout = "_StrataFields"

    /// The superclass of a `@Model` class that subclasses another model:
    /// the first type of its inheritance clause, when the compiler says the
    /// class already conforms to `PersistentModel` (it inherits the
    /// conformance). Nil for a class whose superclass is not a model.
    static func modelSuperclass(of classDecl: ClassDeclSyntax, conformingTo protocols: [TypeSyntax]) -> String? {
        guard !protocols.contains(where: { $0.simpleName == "PersistentModel" }),
            let first = classDecl.inheritanceClause?.inheritedTypes.first?.type,
            first.simpleName != "PersistentModel"
        else { return nil }
        return first.trimmedDescription
    }

    /// Adds `@_PersistedProperty(n)` to each stored `var` the model persists,
    /// `n` being its field number.
    public static func expansion(
        of node: AttributeSyntax,
        attachedTo declaration: some DeclGroupSyntax,
        providingAttributesFor member: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [AttributeSyntax] {
        guard let classDecl = declaration.as(ClassDeclSyntax.self),
            let variable = member.as(VariableDeclSyntax.self),
            let property = StoredProperty(persisted: variable), !property.isLet,
            !variable.hasAttribute("_PersistedProperty"),
            let field = StoredProperty.persisted(in: classDecl.memberBlock.members).firstIndex(where: {
                $0.name == property.name
            })
        else { return [] }
        return ["@_PersistedProperty(\(raw: field))"]
    }

    /// Adds an extension conforming the class to the protocols it does not
    /// conform to yet (`PersistentModel`, `Observable`).
    public static func expansion(
        of node: AttributeSyntax,
        attachedTo declaration: some DeclGroupSyntax,
        providingExtensionsOf type: some TypeSyntaxProtocol,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [ExtensionDeclSyntax] {
        guard declaration.is(ClassDeclSyntax.self), !protocols.isEmpty else { return [] }
        // Nonisolated conformances, as SwiftData's are (`PersistentModel`
        // refines `SendableMetatype`): under default main-actor isolation
        // the class is main-actor isolated, and an inferred isolated
        // `Observable` conformance could not satisfy `PersistentModel`'s.
        let list = protocols.map { "nonisolated " + $0.trimmedDescription }.joined(separator: ", ")
        return [try ExtensionDeclSyntax("extension \(type.trimmed): \(raw: list) {}")]
    }

    /// Reports every member a model cannot store, all at once.
    private static func validate(_ members: MemberBlockItemListSyntax, in context: some MacroExpansionContext) throws {
        var diagnostics: [Diagnostic] = []
        func report(_ node: some SyntaxProtocol, _ message: ModelDiagnostic) {
            diagnostics.append(Diagnostic(node: Syntax(node), message: message))
        }
        for item in members {
            if let ifConfig = item.decl.as(IfConfigDeclSyntax.self) {
                for clause in ifConfig.clauses {
                    guard case .decls(let decls)? = clause.elements else { continue }
                    for inner in decls {
                        guard let variable = inner.decl.as(VariableDeclSyntax.self), !variable.isStatic,
                            !variable.isComputed, !variable.hasAttribute("Transient")
                        else { continue }
                        report(variable, .storedPropertyInIfConfig)
                    }
                }
                continue
            }
            guard let variable = item.decl.as(VariableDeclSyntax.self), !variable.isStatic, !variable.isComputed else {
                continue
            }
            if variable.hasAttribute("Transient") {
                if variable.bindings.contains(where: { $0.initializer == nil }) {
                    report(variable, .transientWithoutDefault)
                }
            } else if variable.bindings.count > 1 {
                report(variable, .multipleBindings)
            } else if let property = StoredProperty(persisted: variable), property.isLet, property.initializer != nil {
                report(variable.bindingSpecifier, .letWithInitialValue)
            } else if let property = StoredProperty(persisted: variable), property.type == nil,
                property.initializer == nil
            {
                report(variable, .missingType)
            } else if let property = StoredProperty(persisted: variable), property.isEphemeral,
                property.initializer == nil
            {
                report(variable, .ephemeralWithoutDefault)
            }
        }
        if !diagnostics.isEmpty { throw DiagnosticsError(diagnostics: diagnostics) }
    }

    /// The key-path groups of every `#Unique` or `#Index` in the class body,
    /// as array-literal source text.
    private static func constraintGroups(named name: String, in members: MemberBlockItemListSyntax) throws -> [String] {
        var groups: [String] = []
        for item in members {
            guard let expansion = item.decl.as(MacroExpansionDeclSyntax.self), expansion.macroName.text == name else {
                continue
            }
            for argument in expansion.arguments {
                guard argument.expression.is(ArrayExprSyntax.self) else {
                    throw DiagnosticsError(argument, .constraintArgument)
                }
                groups.append(argument.expression.trimmedDescription)
            }
        }
        return groups
    }
}
