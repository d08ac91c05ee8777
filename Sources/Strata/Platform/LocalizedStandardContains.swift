import Foundation

// `localizedStandardContains` is the search most SwiftData apps write in a
// `#Predicate`. Foundation on Apple platforms has the predicate expression
// the macro builds (`PredicateExpressions.build_localizedStandardContains`);
// Foundation on Linux has the String method but not the expression. Strata
// provides the expression where Foundation lacks it, with Foundation's
// names, so the same source compiles everywhere.

#if !canImport(Darwin)
    extension PredicateExpressions {
        /// `root.localizedStandardContains(other)` in a predicate.
        public struct StringLocalizedStandardContains<
            Root: PredicateExpression, Other: PredicateExpression
        >: PredicateExpression
        where Root.Output: StringProtocol, Other.Output: StringProtocol {
            /// The expression's value: whether `root` contains `other`.
            public typealias Output = Bool

            /// The expression for the string searched.
            public let root: Root
            /// The expression for the string searched for.
            public let other: Other

            /// An expression that tests whether `root` contains `other`.
            public init(root: Root, other: Other) {
                self.root = root
                self.other = other
            }

            /// Evaluates `root` and `other` and tests them with Foundation's
            /// `localizedStandardContains`.
            public func evaluate(_ bindings: PredicateBindings) throws -> Bool {
                try root.evaluate(bindings).localizedStandardContains(other.evaluate(bindings))
            }
        }

        // swift-format-ignore: AlwaysUseLowerCamelCase
        /// What `#Predicate` calls for `localizedStandardContains` (the
        /// macro's name for it, not Swift's usual spelling).
        public static func build_localizedStandardContains<Root, Other>(
            _ root: Root, _ other: Other
        ) -> StringLocalizedStandardContains<Root, Other> {
            StringLocalizedStandardContains(root: root, other: other)
        }
    }

    extension PredicateExpressions.StringLocalizedStandardContains: Sendable
    where Root: Sendable, Other: Sendable {}

    extension PredicateExpressions.StringLocalizedStandardContains: Codable where Root: Codable, Other: Codable {
        private enum CodingKeys: String, CodingKey { case root, other }

        /// Decodes the expression's `root` and `other`.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            root = try container.decode(Root.self, forKey: .root)
            other = try container.decode(Other.self, forKey: .other)
        }

        /// Encodes the expression's `root` and `other`.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(root, forKey: .root)
            try container.encode(other, forKey: .other)
        }
    }

    extension PredicateExpressions.StringLocalizedStandardContains: StandardPredicateExpression
    where Root: StandardPredicateExpression, Other: StandardPredicateExpression {}
#endif

/// Case- and diacritic-insensitive containment in the current locale: the
/// semantics of Foundation's `localizedStandardContains`, which Strata's
/// query evaluator applies on every platform.
func _strataLocalizedStandardContains(_ text: String, _ part: String) -> Bool {
    if part.isEmpty { return false }
    return text.range(of: part, options: [.caseInsensitive, .diacriticInsensitive], locale: .current) != nil
}
